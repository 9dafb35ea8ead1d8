"""``roost dispatch`` and the commands around it, against a daemon the CLI starts itself."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from pathlib import Path

import roost
from tests.fakes.anthropic_server import serve_anthropic

from .conftest import ROOST, E2E, alive, bash, detach, text, wait_until

def test_demo_dispatch_starts_the_daemon_and_every_command_sees_the_run(e2e: E2E) -> None:
    refused = e2e.roost("status")
    assert refused.returncode == 10 and "no roost daemon" in refused.stderr
    assert not e2e.socket.exists()
    started = time.time()

    done = e2e.roost("dispatch", "--yes", "list the files here and count them", "--model", "scripted/demo")

    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("▶ run r") and "scripted/demo" in lines[0]
    assert "task: list the files here and count them" in lines
    assert "→ bash ls -1A" in lines
    assert any(line.startswith("  ✓ a.txt (+2 lines)") for line in lines)  # a.txt b.txt c.py
    assert "→ bash ls -1A | wc -l" in lines
    assert any(line.startswith("  ✓ 3 ") for line in lines)
    assert lines[-1].startswith("■ done · 3 turns · ")
    assert e2e.socket.exists()

    info = e2e.status()
    pid = info["pid"]
    assert alive(pid)
    assert info["version"] == roost.__version__
    assert info["socket"] == str(e2e.socket)
    assert isinstance(info["uptime"], float) and 0 <= info["uptime"] < 60
    assert (info["sessions"], info["runs"]) == (1, 0)
    human = e2e.ok("status").stdout
    assert f"pid {pid}" in human and str(e2e.socket) in human and "sessions 1 · runs in flight 0" in human

    (row,) = e2e.json_out("sessions", "--json")
    session = row["id"]
    assert re.fullmatch(r"[0-9a-f]{12}", session)
    assert started - 1 <= row["created"] <= time.time()
    assert os.path.realpath(row["cwd"]) == os.path.realpath(e2e.project)
    assert row["status"] == "done"
    assert row["title"] == "list the files here and count them"
    assert started - 1 <= row["last_active"] <= time.time()
    stored = e2e.events(session)
    assert row["events"] == len(stored) == stored[-1]["seq"]
    table = e2e.ok("sessions").stdout.splitlines()
    assert table[0].split() == ["ID", "LAST", "ACTIVE", "STATUS", "EVENTS", "TITLE", "CWD"]
    assert table[1].startswith(session) and " done " in table[1] and table[1].endswith(row["cwd"])
    assert " list the files here and count them " in table[1]

    history = e2e.ok("logs", session).stdout
    # The stored history reads the same as the run did live, each event's first line
    # marked with the seq `fork --at` takes.
    assert re.sub(r"^\[\d+\] ", "", history, flags=re.M) == done.stdout
    finished = next(e for e in stored if e["type"] == "run.finished")
    assert history.splitlines()[-1].startswith(f"[{finished['seq']}] ■ done")
    assert e2e.ok("logs", session[:4]).stdout == history
    # With no session named: the one of this folder used last.
    assert e2e.ok("logs").stdout == history

    stopped = e2e.ok("stop")
    assert stopped.stdout.strip() == f"stopped roost daemon (pid {pid})"
    wait_until(lambda: not alive(pid), 5, what="the daemon to exit")
    assert not e2e.socket.exists()
    after = e2e.roost("status")
    assert after.returncode == 10 and "no roost daemon" in after.stderr


def test_json_prints_one_event_per_line_the_same_maps_as_the_store(e2e: E2E) -> None:
    done = e2e.roost("dispatch", "--yes", "list the files here and count them", "--model", "scripted/demo", "--json")

    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert all(isinstance(e.get("type"), str) for e in events)
    stored = [e for e in events if e.get("seq") is not None]
    # A new session's stream starts with its creation: the whole log, and nothing else.
    assert [e["type"] for e in stored[:2]] == ["session.created", "run.started"]
    assert stored[-1]["type"] == "run.finished" and stored[-1]["reason"] == "done"
    assert events[-1] is stored[-1]
    assert [e["seq"] for e in stored] == list(range(stored[0]["seq"], stored[-1]["seq"] + 1))
    deltas = [e for e in events if e["type"] == "text.delta"]
    assert deltas and all("seq" not in e for e in deltas)
    assert e2e.events(stored[0]["session"]) == stored


def test_exit_status_says_how_the_run_ended(e2e: E2E) -> None:
    two_tool_steps = e2e.script([bash("true")], [bash("true")], [text("never reached")])
    capped = e2e.roost("dispatch", "--yes", "go", "--model", two_tool_steps, "--max-turns", "1")
    assert capped.returncode == 3, capped.stdout + capped.stderr
    assert capped.stdout.splitlines()[-1].startswith("■ max_turns · 1 turns")

    short = e2e.script([bash("true")])
    ran_out = e2e.roost("dispatch", "--yes", "go", "--model", short)
    assert ran_out.returncode == 1, ran_out.stdout + ran_out.stderr
    assert ran_out.stdout.splitlines()[-1].startswith("■ error")
    assert "the script has 1 responses and this is call 2" in ran_out.stdout

    sessions_before = e2e.status()["sessions"]
    unknown = e2e.roost("dispatch", "--yes", "go", "--model", "nosuch/x")
    assert unknown.returncode == 10
    assert unknown.stdout == ""
    assert "unknown provider 'nosuch'" in unknown.stderr and "MODEL_UNAVAILABLE" in unknown.stderr
    assert e2e.status()["sessions"] == sessions_before

    slow = e2e.script([bash("sleep 5")], [text("never reached")])
    watcher = e2e.popen([ROOST, "dispatch", "--yes", "go", "--model", slow], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    session = wait_until(
        lambda: [r["id"] for r in e2e.json_out("sessions", "--json") if r["status"] == "running"],
        what="the run to start",
    )[0]
    e2e.wait_event(session, lambda e: e["type"] == "tool.started")
    e2e.ok("abort", session)
    out, _ = watcher.communicate(timeout=10)
    assert watcher.returncode == 5, out
    assert out.splitlines()[-1].startswith("■ aborted")


def test_detach_returns_at_once_and_the_run_goes_on(e2e: E2E) -> None:
    model = e2e.script([bash("sleep 1")], [text("slept well")])

    session, run = detach(e2e, "sleep a bit", "--model", model)

    # The run is still going when the command has returned.
    assert e2e.session_row(session)["status"] == "running"
    assert e2e.status()["runs"] == 1
    wait_until(lambda: e2e.session_row(session)["status"] == "done", 10, what="the run to finish")
    last = e2e.events(session)[-1]
    assert (last["type"], last["run"], last["reason"], last["text"]) == ("run.finished", run, "done", "slept well")

    as_json = json.loads(e2e.ok("dispatch", "--yes", "again", "--model", "scripted/demo", "--detach", "--json").stdout)
    assert set(as_json) >= {"session", "run"} and as_json["session"] != session


def test_a_repeated_request_id_returns_the_first_run(e2e: E2E) -> None:
    model = e2e.script([bash("sleep 0.5")], [text("once only")])

    first = detach(e2e, "do it once", "--model", model, "--request-id", "key-1")
    # Repeated while the first run is in flight, and again after it ended.
    assert detach(e2e, "do it once", "--model", model, "--request-id", "key-1") == first
    wait_until(lambda: e2e.session_row(first[0])["status"] == "done", 10, what="the run to finish")
    replay = e2e.roost("dispatch", "--yes", "do it once", "--model", model, "--request-id", "key-1", "--json")

    assert replay.returncode == 0, replay.stderr
    events = [json.loads(line) for line in replay.stdout.splitlines()]
    assert {e["session"] for e in events} == {first[0]}
    assert [e["run"] for e in events if e["type"] == "run.started"] == [first[1]]
    assert events[-1]["type"] == "run.finished" and events[-1]["run"] == first[1]
    assert [e["type"] for e in e2e.events(first[0])].count("run.started") == 1
    assert e2e.status()["sessions"] == 1

    other = detach(e2e, "do it once", "--model", model, "--request-id", "key-2")
    assert other[0] != first[0] and other[1] != first[1]
    assert e2e.status()["sessions"] == 2


def test_max_tokens_limits_every_reply_of_the_run(e2e: E2E) -> None:
    reply = {"content": [{"type": "text", "text": "short"}]}
    with serve_anthropic(default=reply) as server:
        env = dict(e2e.env, ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=server.base_url)
        done = e2e.roost("dispatch", "be brief", "--model", "anthropic/claude-test", "--max-tokens", "123", env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert [r.body["max_tokens"] for r in server.requests] == [123]
    # The daemon's log holds what roost has to say, not a line per HTTP request.
    assert "HTTP Request" not in e2e.log_file.read_text()
    refused = e2e.roost("dispatch", "t", "--max-tokens", "0")
    assert refused.returncode == 2 and "--max-tokens" in refused.stderr


def test_a_guardrail_that_warns_is_printed_and_the_run_goes_on(e2e: E2E) -> None:
    config = Path(e2e.env["XDG_CONFIG_HOME"]) / "roost" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[[guardrails.rules]]\nname = "todo"\npattern = "TODO"\nwhat = "a TODO"\naction = "warn"\n')
    model = e2e.script([bash("echo TODO: tests")], [text("Noted.")])
    done = e2e.roost("dispatch", "--yes", "look", "--model", model)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    at = lines.index("⚠ guardrail todo: the input matched a TODO (in the result of toolu_s1_0; the run goes on)")
    assert lines[at - 1].startswith("  ✓ TODO: tests") and "Noted." in lines[at + 1:]


def test_status_counts_the_background_commands_running(e2e: E2E) -> None:
    started = e2e.project / "started"
    model = e2e.script(
        [bash(f"touch {started}; sleep 60", run_in_background=True)],
        [bash(f"while [ ! -e {e2e.project / 'go'} ]; do sleep 0.05; done")],
        [text("done")],
    )
    session, _ = detach(e2e, "serve", "--model", model, "--sandbox", "off")
    wait_until(started.exists, 10, what="the background command to start")
    wait_until(lambda: e2e.status().get("background_commands") == 1, 10, what="status to count it")
    assert "runs in flight 1 · background commands 1" in e2e.ok("status").stdout
    (e2e.project / "go").touch()
    wait_until(lambda: e2e.session_row(session)["status"] == "done", 10, what="the run to finish")
    assert e2e.status()["background_commands"] == 0
    assert "background commands" not in e2e.ok("status").stdout
