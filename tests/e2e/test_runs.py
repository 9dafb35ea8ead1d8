"""A run seen and driven from several processes: steer, abort, follow, a terminal that closes."""

from __future__ import annotations

import json
import re
import subprocess
import time

from .conftest import ROOST, E2E, LineReader, bash, detach, group_members, text, wait_until


def test_steer_and_abort_from_another_process(e2e: E2E) -> None:
    pidfile = e2e.tmp / "tool.pid"
    model = e2e.script([bash(f"echo $$ > {pidfile}; sleep 2")], [text("never reached")])
    # Unsandboxed: the pid the shell writes is then this machine's.
    session, run = detach(e2e, "wait a bit", "--model", model, "--sandbox", "off")
    e2e.wait_event(session, lambda e: e["type"] == "tool.started")
    tool = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the tool's pid"))
    e2e.kill_group_at_teardown(tool)

    steered = e2e.roost("steer", session, "also x")
    assert (steered.returncode, steered.stdout.strip()) == (0, "steering queued"), steered.stderr
    e2e.wait_event(session, lambda e: e["type"] == "steer.queued" and e["text"] == "also x")
    aborted = e2e.roost("abort", session[:5])
    assert (aborted.returncode, aborted.stdout.strip()) == (0, f"aborted run {run}"), aborted.stderr

    events = e2e.wait_event(session, lambda e: e["type"] == "run.finished", timeout=5)
    last = events[-1]
    assert (last["type"], last["run"], last["reason"]) == ("run.finished", run, "aborted")
    # The tool's process group is killed, well before its sleep would have ended.
    wait_until(lambda: group_members(tool) == [], 1.0, what="the tool's processes to die")
    assert e2e.session_row(session)["status"] == "aborted"

    for args in (("steer", session, "more"), ("abort", session)):
        idle = e2e.roost(*args)
        assert idle.returncode == 10, idle.stdout
        assert "NOT_RUNNING" in idle.stderr and "no run in flight" in idle.stderr
        assert idle.stdout == ""


def unmarked(line: str) -> str:
    """A line of `roost logs` without the seq it starts with."""
    return re.sub(r"^\[\d+\] ", "", line)


def test_abort_after_step_lets_the_tool_finish_and_shows_it(e2e: E2E) -> None:
    go = e2e.tmp / "go"
    model = e2e.script([bash(f"while [ ! -e {go} ]; do sleep 0.02; done; echo finished")], [text("never reached")])
    session, run = detach(e2e, "wait for go", "--model", model, "--sandbox", "off")
    e2e.wait_event(session, lambda e: e["type"] == "tool.started")
    follow = e2e.popen([ROOST, "logs", session, "--follow"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    lines = LineReader(follow.stdout)
    stopping = e2e.roost("abort", session, "--after-step")
    assert (stopping.returncode, stopping.stdout.strip()) == (0, f"run {run} ends after the step in flight")
    lines.until(lambda line: line.startswith("(the run ends after this step: stopped by the user after the step)"))
    go.touch()
    lines.until(lambda line: unmarked(line).startswith("  ✓ finished"))
    lines.until(lambda line: unmarked(line).startswith("■ aborted"))
    events = e2e.events(session)
    assert [e["type"] for e in events if e["type"] == "message.assistant"] == ["message.assistant"]
    assert events[-1]["reason"] == "aborted" and e2e.session_row(session)["status"] == "aborted"


def test_logs_follow_shows_history_then_live_events(e2e: E2E) -> None:
    model = e2e.script(
        [text("Step one."), bash("sleep 0.3")],
        [text("Step two."), bash("sleep 0.3")],
        [text("Step three."), bash("sleep 0.3")],
        [text("All three steps done.")],
    )
    session, run = detach(e2e, "three slow steps", "--model", model)
    e2e.wait_event(session, lambda e: e["type"] == "tool.started")

    as_json = e2e.popen([ROOST, "logs", session, "--follow", "--json"], stdout=subprocess.PIPE)
    as_text = e2e.popen([ROOST, "logs", session[:6], "-f"], stdout=subprocess.PIPE)
    json_lines, text_lines = LineReader(as_json.stdout), LineReader(as_text.stdout)
    json_lines.until(lambda line: json.loads(line)["type"] == "run.finished", timeout=15)
    text_lines.until(lambda line: unmarked(line).startswith("■ "), timeout=15)
    # Neither ends by itself: following goes on until interrupted.
    assert as_json.poll() is None and as_text.poll() is None
    as_json.terminate()
    as_text.terminate()

    events = [json.loads(line) for line in json_lines.lines]
    stored = [e for e in events if e.get("seq") is not None]
    # History from the first event, then live, with no gap and no duplicate.
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    assert stored == e2e.events(session)
    assert stored[0]["type"] == "session.created"
    assert (stored[-1]["type"], stored[-1]["run"], stored[-1]["reason"]) == ("run.finished", run, "done")
    # Text deltas are never stored: seeing them means the events came live.
    live = "".join(e["text"] for e in events if e["type"] == "text.delta")
    assert "All three steps done." in live

    # Each event's first line is marked with its seq, as `roost fork --at` takes it.
    started = next(e for e in stored if e["type"] == "run.started")
    assert text_lines.lines[0].startswith(f"[{started['seq']}] ▶ run {run}")
    lines = [unmarked(line.rstrip("\n")) for line in text_lines.lines]
    assert lines[0].startswith(f"▶ run {run}")
    assert "task: three slow steps" in lines
    assert lines.count("→ bash sleep 0.3") == 3
    assert "All three steps done." in lines
    assert lines[-1].startswith("■ done · 4 turns")


def test_a_run_outlives_the_terminal_that_started_it(e2e: E2E) -> None:
    model = e2e.script([bash("sleep 0.6")], [bash("sleep 0.6")], [text("Finished with nobody watching.")])
    cli = e2e.popen([ROOST, "dispatch", "--yes", "keep going", "--model", model], stdout=subprocess.PIPE)
    out = LineReader(cli.stdout)
    header = out.until(lambda line: line.startswith("▶ run"))
    match = re.match(r"▶ run (r[0-9a-f]+) · .* · session ([0-9a-f]+)$", header.strip())
    assert match, header
    run, session = match.groups()
    out.until(lambda line: line.startswith("→ bash"))

    cli.kill()
    assert cli.wait(timeout=5) < 0
    killed_at = time.time()

    assert e2e.session_row(session)["status"] == "running"
    wait_until(lambda: e2e.session_row(session)["status"] == "done", 10, what="the run to finish")
    last = e2e.events(session)[-1]
    assert (last["type"], last["run"], last["reason"]) == ("run.finished", run, "done")
    assert last["text"] == "Finished with nobody watching."
    assert last["ts"] > killed_at


def test_logs_follow_carries_on_across_a_daemon_restart(e2e: E2E) -> None:
    model = e2e.script([bash("sleep 30")], [text("after the restart")])
    session, run = detach(e2e, "slow", "--model", model)
    e2e.wait_event(session, lambda e: e["type"] == "tool.started")
    follower = e2e.popen([ROOST, "logs", session, "--follow", "--json"], stdout=subprocess.PIPE)
    lines = LineReader(follower.stdout)
    lines.until(lambda line: json.loads(line)["type"] == "tool.started")

    e2e.ok("stop")
    e2e.ok("daemon")
    # The follower re-attaches from the last seq it saw: the abort stored at shutdown, then
    # the next run's events, with no gap and no duplicate.
    again = e2e.ok("dispatch", "--yes", "go on", "--session", session, "--model", model, "--detach")
    second_run = again.stdout.split()[-1]
    lines.until(
        lambda line: (json.loads(line)["type"], json.loads(line).get("run")) == ("run.finished", second_run),
        timeout=15,
    )
    assert follower.poll() is None
    follower.terminate()

    stored = [json.loads(line) for line in lines.lines]
    stored = [e for e in stored if e.get("seq") is not None]
    assert [e["seq"] for e in stored] == list(range(1, len(stored) + 1))
    assert stored == e2e.events(session)
    reasons = [(e["run"], e["reason"]) for e in stored if e["type"] == "run.finished"]
    assert reasons == [(run, "aborted"), (second_run, "done")]
