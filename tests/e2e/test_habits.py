"""CLI habits people bring from other tools: piped input, --continue, NO_COLOR, short errors,
and no empty session left behind by a dispatch that failed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from .conftest import E2E, ROOST, bash, text


def test_piped_input_follows_the_task_and_dash_reads_the_task(e2e: E2E) -> None:
    model = e2e.script([text("ok")])
    done = subprocess.run(
        [ROOST, "dispatch", "review this", "--model", model, "--json"],
        input="diff --git a/x b/x\n+added line\n", capture_output=True, text=True, cwd=e2e.project, env=e2e.env,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    started = next(json.loads(line) for line in done.stdout.splitlines() if '"run.started"' in line)
    assert started["task"] == "review this\n\ndiff --git a/x b/x\n+added line\n"
    whole = subprocess.run(
        [ROOST, "dispatch", "-", "--model", e2e.script([text("ok")]), "--json"],
        input="the whole task\n", capture_output=True, text=True, cwd=e2e.project, env=e2e.env, timeout=30,
    )
    assert '"task": "the whole task\\n"' in whole.stdout


def test_piped_input_is_the_task_when_none_is_given_and_a_long_one_is_folded(e2e: E2E) -> None:
    piped = "".join(f"line {n}\n" for n in range(1, 401))
    done = subprocess.run(
        [ROOST, "dispatch", "--model", e2e.script([text("ok")])],
        input=piped, capture_output=True, text=True, cwd=e2e.project, env=e2e.env, timeout=30,
    )
    assert done.returncode == 0, done.stderr
    assert "task: line 1\n" in done.stdout and "line 8\n… 392 more lines (" in done.stdout
    assert "line 9\n" not in done.stdout
    (row,) = e2e.json_out("sessions", "--json")
    assert row["title"] == "line 1"  # from a task long enough to be stored apart
    logged = e2e.ok("logs", row["id"], "--json").stdout.splitlines()
    assert next(json.loads(e) for e in logged if '"run.started"' in e)["task"] == piped
    nothing = subprocess.run(
        [ROOST, "dispatch", "--model", "scripted/demo"], input="", capture_output=True, text=True,
        cwd=e2e.project, env=e2e.env, timeout=30,
    )
    assert nothing.returncode == 2 and "the task is empty" in nothing.stderr


def test_a_mistyped_command_gets_the_closest_name(e2e: E2E) -> None:
    typo = e2e.roost("dispatc", "go")
    assert typo.returncode == 2
    assert "No such command 'dispatc'. Did you mean 'dispatch'?" in typo.stderr
    assert "Did you mean" not in e2e.roost("zzz").stderr


def test_continue_runs_in_this_folders_last_session(e2e: E2E) -> None:
    refused = e2e.roost("dispatch", "-c", "go on", "--model", "scripted/demo")
    assert refused.returncode == 2 and "no session in" in refused.stderr
    model = e2e.script([text("one")], [text("two")])
    first = json.loads(e2e.ok("dispatch", "start", "--model", model, "--json").stdout.splitlines()[0])
    second = json.loads(e2e.ok("dispatch", "-c", "more", "--model", model, "--json").stdout.splitlines()[0])
    assert second["session"] == first["session"]
    assert len(e2e.json_out("sessions", "--json")) == 1
    # A newer session, then the first one used again: -c means the one used last.
    newer = json.loads(e2e.ok("dispatch", "other", "--model", e2e.script([text("new")]), "--json").stdout.splitlines()[0])
    # The scripted model answers by the session's turn: the first session had two.
    model = e2e.script([text("one")], [text("two")], [text("old again")], [text("which")])
    assert newer["session"] != first["session"]
    e2e.ok("dispatch", "-s", first["session"], "back", "--model", model)
    third = json.loads(e2e.ok("dispatch", "-c", "which", "--model", model, "--json").stdout.splitlines()[0])
    assert third["session"] == first["session"]


def test_no_color_and_piped_output_are_plain(e2e: E2E) -> None:
    model = e2e.script([bash("true")], [text("done")])
    for env in (e2e.env, dict(e2e.env, NO_COLOR="1")):
        out = e2e.ok("dispatch", "--yes", "go", "--model", model, env=env).stdout
        assert "\x1b[" not in out
        model = e2e.script([bash("true")], [text("done")])


def test_an_unknown_agent_is_one_line_with_the_closest_names(e2e: E2E) -> None:
    agents = e2e.project / ".roost" / "agents"
    agents.mkdir(parents=True)
    (agents / "reviewer.md").write_text("---\nname: reviewer\n---\nReview.\n")
    refused = e2e.roost("dispatch", "go", "--agent", "reviwer", "--model", "scripted/demo")
    assert refused.returncode == 10
    assert refused.stderr.strip().splitlines() == ["Error: no agent 'reviwer' here; did you mean reviewer? [INVALID_PARAMS]"]


def test_a_failed_dispatch_leaves_no_session_behind(e2e: E2E) -> None:
    for args in (
        ("--model", "nosuch/x"), ("--agent", "nobody", "--model", "scripted/demo"), ("--allow", "bash("),
        ("--model", "scripted/dmeo"),
    ):
        assert e2e.roost("dispatch", "go", *args).returncode == 10, args
    assert e2e.json_out("sessions", "--json") == []


def test_a_model_named_wrong_gets_the_name_meant(e2e: E2E) -> None:
    typo = e2e.roost("dispatch", "go", "--model", "scripted/dmeo")
    assert "no script file at" in typo.stderr and "did you mean scripted/demo?" in typo.stderr
    bare = e2e.roost("dispatch", "go", "--model", "gpt-4o")
    assert "is not of the form provider/model" in bare.stderr and "did you mean openai/gpt-4o?" in bare.stderr
    assert "did you mean" not in e2e.roost("dispatch", "go", "--model", "llama3").stderr


def test_config_keys_roost_does_not_read_are_said_with_the_key_meant(e2e: E2E) -> None:
    config = Path(e2e.env["XDG_CONFIG_HOME"]) / "roost" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('default-model = "scripted/demo"\n\n[permisions]\nallow = ["bash(ls)"]\n\n[providers.local]\nkind = "openai"\nbase-url = "http://127.0.0.1:9/v1"\n')
    (e2e.project / ".roost").mkdir()
    (e2e.project / ".roost" / "config.toml").write_text("[compaction]\nkeep = 3\n")
    e2e.ok("sessions")  # starts the daemon, which status does not
    status = e2e.ok("status").stdout
    assert f"{config}: unknown key default-model, ignored; did you mean default_model?" in status
    assert f"{config}: unknown table [permisions], ignored; did you mean [permissions]?" in status
    assert f"{config}: unknown key base-url in [providers.local], ignored; did you mean base_url?" in status
    assert "config.toml: unknown key keep in [compaction], ignored (known: at, keep_turns)" in status
    done = e2e.roost("dispatch", "go", "--model", e2e.script([text("ok")]))
    assert done.returncode == 0
    warned = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warned) == 4 and "did you mean [permissions]?" in warned[1]
    assert json.loads(e2e.ok("status", "--json").stdout)["config"]["warnings"] == [w[len("warning: "):] for w in warned]


def test_a_broken_config_makes_status_fail_and_each_error_is_said_once(e2e: E2E) -> None:
    config = Path(e2e.env["XDG_CONFIG_HOME"]) / "roost" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    e2e.ok("dispatch", "go", "--model", e2e.script([text("ok")]))
    config.write_text('default_model = "scripted/demo"\n[providers\n')
    status = e2e.roost("status")
    assert status.returncode == 1
    assert f"config   BROKEN: {config}:" in status.stdout and "every dispatch here fails" in status.stdout
    failed = e2e.roost("dispatch", "go", "--model", "scripted/demo")
    assert failed.returncode == 10
    assert len(failed.stderr.strip().splitlines()) == 1 and str(config) in failed.stderr
