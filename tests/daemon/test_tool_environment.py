"""What of the client's environment a command sees: secrets by name and by value stay out,
through a real daemon and real bash; the user's [tools.env] policy (Codex's
shell_environment_policy) decides the rest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from roost.daemon.runs._environ import EnvPolicy, tool_environment
from roost.protocol.trio_client import TrioClient

from .conftest import bash, events_until, finished, text, write_script

#: 26 variables that carry a secret, by name or by value.
SECRETS = {
    "ANTHROPIC_API_KEY": "sk-ant-api03-abcdefghijklmnop",
    "OPENAI_API_KEY": "sk-abcdefghijklmnopqrstuv",
    "GITHUB_TOKEN": "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AWS_SESSION_TOKEN": "FwoGZXIvYXdzEXAMPLE",
    "DB_PASSWORD": "hunter2",
    "MYSQL_PWD": "hunter2",
    "PGPASSWORD": "hunter2",
    "GOOGLE_APPLICATION_CREDENTIALS": "/home/me/key.json",
    "DATABASE_URL": "postgres://app:hunter2@db.internal:5432/app",
    "REDIS_URL": "redis://:hunter2@cache:6379/0",
    "SENTRY_DSN": "https://abc123@o1.ingest.sentry.io/1",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.com/services/T000/B000/XXXXXXXX",
    "NPM_CONFIG__AUTH": "dXNlcjpwYXNz",
    "DOCKER_AUTH_CONFIG": '{"auths": {}}',
    "CI_JOB_JWT": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl",
    "API_AUTH": "Basic dXNlcjpwYXNz",
    "GITHUB_PAT": "github_pat_11ABCDEFG0123456789_abcdefghij",
    "STRIPE_SK": "sk_live_51Habcdefghijklmnop",
    "SSH_AUTH_SOCK": "/tmp/ssh-XXXX/agent.123",
    "MY_CONFIG": "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "DEPLOY_HOOK": "https://hooks.slack.com/services/T1/B1/Y",
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "FIREBASE_WEB": "AIzaSyA-abcdefghijklmnopqrstuvwxyz12345",
    "HF_HUB": "hf_abcdefghijklmnopqrstuvwxyz",
    "GITLAB_CI_HELPER": "glpat-abcdefghijklmnopqrst",
}
#: And what commands need, which must pass.
PLAIN = {
    "PATH": os.environ["PATH"], "HOME": "/home/me", "LANG": "C.UTF-8", "VIRTUAL_ENV": "/p/.venv",
    "GIT_AUTHOR_NAME": "Me", "PWD": "/p", "OLDPWD": "/", "PYTHONPATH": "src", "NODE_ENV": "test",
    "HTTP_PROXY": "http://proxy:3128", "EDITOR": "vim", "PATHEXT": ".py",
}


def test_the_default_keeps_secrets_out_by_name_and_by_value() -> None:
    env = tool_environment({**SECRETS, **PLAIN})
    assert not set(SECRETS) & set(env), sorted(set(SECRETS) & set(env))
    assert set(PLAIN) <= set(env)


def test_the_users_policy_inherits_passes_excludes_and_sets() -> None:
    given = {**SECRETS, **PLAIN, "LC_ALL": "C"}
    # Nothing inherited, and a PATH all the same: bash's own, for a PATH unset, ends in ".".
    assert tool_environment(given, policy=EnvPolicy(inherit="none")) == {"PATH": os.defpath}
    assert set(tool_environment(given, policy=EnvPolicy(inherit="core"))) == {"PATH", "HOME", "LANG", "LC_ALL"}
    passed = tool_environment(given, policy=EnvPolicy(passed=("GITHUB_TOKEN",)))
    assert passed["GITHUB_TOKEN"] == SECRETS["GITHUB_TOKEN"] and "GITHUB_PAT" not in passed
    only = tool_environment(given, policy=EnvPolicy(include_only=("PATH", "LC_*"), exclude=("LC_ALL",), set={"CI": "1"}))
    assert only == {"PATH": PLAIN["PATH"], "CI": "1"}


async def test_commands_see_none_of_the_26_secrets(client: TrioClient, project: Path) -> None:
    model = write_script(project, [bash("env")], [text("done")])
    run = await client.call(
        "dispatch", task="t", model=model, cwd=str(project), attach=True, yes=True, env={**SECRETS, **PLAIN}
    )
    events = await events_until(client, finished(run["run"]))
    [shown] = [e["result"] for e in events if e["type"] == "tool.finished"]
    names = {line.split("=", 1)[0] for line in shown.splitlines()}
    assert not set(SECRETS) & names, sorted(set(SECRETS) & names)
    for value in SECRETS.values():
        assert value not in shown
    assert {"VIRTUAL_ENV", "GIT_AUTHOR_NAME", "NODE_ENV", "HTTP_PROXY"} <= names


@pytest.mark.parametrize("table", ['inherit = "sometimes"', 'set = {A = 1}', 'exclude = "X"', 'inhert = "all"'])
def test_a_bad_tools_env_table_is_an_error(table: str, tmp_path: Path) -> None:
    from roost.daemon.folder._config import ConfigError, load_config

    config = Path(os.environ["XDG_CONFIG_HOME"]) / "roost" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f"[tools.env]\n{table}\n")
    with pytest.raises(ConfigError, match=r"\[tools.env\]"):
        load_config(str(tmp_path))
