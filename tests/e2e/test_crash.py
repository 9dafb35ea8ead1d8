"""The daemon dies (SIGKILL) or is told to stop (SIGTERM) in the middle of a run."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from .conftest import ROOST, E2E, alive, bash, detach, group_members, text, wait_until


def test_a_killed_daemon_loses_nothing_and_the_next_one_ends_the_run(e2e: E2E) -> None:
    pidfile, marker = e2e.tmp / "tool.pid", e2e.tmp / "never"
    model = e2e.script([bash(f"echo $$ > {pidfile}; sleep 30; echo never > {marker}")])
    # Unsandboxed, so that the shell's pid is this machine's and only the ledger can kill it
    # (a sandboxed command dies with the daemon: see test_sandbox.py).
    session, run = detach(e2e, "a long tool call", "--model", model, "--sandbox", "off")
    before = e2e.wait_event(session, lambda e: e["type"] == "tool.started")
    tool = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the tool's pid"))
    e2e.kill_group_at_teardown(tool)
    (started,) = [e for e in before if e["type"] == "tool.started"]
    old = e2e.status()["pid"]

    os.kill(old, signal.SIGKILL)
    wait_until(lambda: not alive(old), 5, what="the daemon to die")
    assert e2e.socket.exists()  # left behind: stale now

    # The next command starts a new daemon, which ends the interrupted run before serving.
    after = e2e.events(session)
    assert e2e.status()["pid"] != old
    assert after[: len(before)] == before
    new = after[len(before):]
    assert [e["type"] for e in new] == ["tool.finished", "run.finished"]
    finished, ended = new
    assert finished["call_id"] == started["call_id"] and finished["is_error"] is True
    assert "interrupted" in finished["result"]
    assert (ended["run"], ended["reason"]) == (run, "error") and "interrupted" in ended["error"]
    assert e2e.session_row(session)["status"] == "error"
    # Not run again: one start, the pid file still names the first shell, no "never".
    assert [e["type"] for e in after].count("tool.started") == 1
    assert pidfile.read_text().strip() == str(tool)
    assert not marker.exists()
    # The dead daemon could not kill its tool's shell; the next one did, before serving.
    wait_until(lambda: not group_members(tool), 5, what="the orphaned tool to be killed")

    # The session carries on: the model's next response (its second) is text.
    resumed = e2e.script([text("not used")], [text("Back after the crash.")])
    again = e2e.roost("dispatch", "--yes", "carry on", "--session", session, "--model", resumed)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "Back after the crash." in again.stdout.splitlines()
    assert again.stdout.splitlines()[-1].startswith("■ done")
    assert e2e.session_row(session)["status"] == "done"


def test_sigterm_aborts_runs_kills_tools_and_exits_0(e2e: E2E) -> None:
    with open(e2e.tmp / "daemon.stderr", "w") as errors:
        daemon = e2e.popen([ROOST, "daemon", "--foreground"], stdout=subprocess.DEVNULL, stderr=errors)
    wait_until(lambda: e2e.roost("status").returncode == 0, 10, what="the daemon to listen")
    # `roost daemon --foreground` execs the daemon: same process.
    assert e2e.status()["pid"] == daemon.pid
    pidfile = e2e.tmp / "tool.pid"
    model = e2e.script([bash(f"echo $$ > {pidfile}; sleep 30")], [text("never reached")])
    session, run = detach(e2e, "a long tool call", "--model", model, "--sandbox", "off")
    e2e.wait_event(session, lambda e: e["type"] == "tool.started")
    tool = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the tool's pid"))
    e2e.kill_group_at_teardown(tool)

    asked = time.monotonic()
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=10) == 0
    assert time.monotonic() - asked < 5
    assert group_members(tool) == []
    assert not e2e.socket.exists()

    events = e2e.events(session)  # through a new daemon
    last = events[-1]
    assert (last["type"], last["run"], last["reason"]) == ("run.finished", run, "aborted")
    (finished,) = [e for e in events if e["type"] == "tool.finished"]
    assert finished["is_error"] is True


def test_an_exec_run_goes_on_after_the_daemon_is_killed(e2e: E2E) -> None:
    (e2e.project / "check.sh").write_text("test -f done.txt || { echo 'done.txt missing'; exit 1; }\n")
    pidfile = e2e.tmp / "tool.pid"
    model = e2e.script([bash(f"echo $$ > {pidfile}; sleep 30")], [bash("touch done.txt")], [text("Done.")])
    session, run = detach(e2e, "make done.txt", "--model", model, "--mode", "exec", "--sandbox", "off")
    e2e.wait_event(session, lambda e: e["type"] == "tool.started")
    tool = int(wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the tool's pid"))
    e2e.kill_group_at_teardown(tool)
    old = e2e.status()["pid"]
    os.kill(old, signal.SIGKILL)
    wait_until(lambda: not alive(old), 5, what="the daemon to die")
    # The next daemon reports the sleeping call as interrupted and carries the run on.
    events = e2e.wait_event(session, lambda e: e["type"] == "run.finished", timeout=20)
    assert events[-1]["reason"] == "check_passed" and events[-1]["run"] == run
    interrupted = [e for e in events if e["type"] == "tool.finished"][0]
    assert "interrupted" in interrupted["result"]
    assert (e2e.project / "done.txt").exists()
