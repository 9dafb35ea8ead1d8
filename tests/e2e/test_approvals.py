"""Approvals from the command line: a waiting dispatch, pending, approve, deny, answer."""

from __future__ import annotations

import json
import os
import signal
import subprocess

from .conftest import ROOST, E2E, LineReader, alive, bash, text, wait_until


def pending(e2e: E2E) -> list[dict]:
    return e2e.json_out("pending", "--json")


def test_a_dispatch_waits_for_an_approval_given_from_another_terminal(e2e: E2E) -> None:
    model = e2e.script([bash("echo hi > made.txt")], [{"type": "tool_use", "name": "ask_human", "input": {"question": "Colour?", "choices": ["red", "blue"]}}], [text("Done.")])
    watcher = e2e.popen([ROOST, "dispatch", "make a file", "--model", model], stdout=subprocess.PIPE)
    out = LineReader(watcher.stdout)
    hint = out.until(lambda line: "roost approve" in line)
    [row] = wait_until(lambda: pending(e2e), what="the open request")
    assert f"roost approve {row['session']} {row['call_id']}" in hint
    listed = e2e.ok("pending").stdout
    assert f"{row['session']} {row['call_id']} bash echo hi > made.txt" in listed
    assert e2e.session_row(row["session"])["status"] == "waiting"
    assert not (e2e.project / "made.txt").exists()

    # A session id prefix is enough, as for every command.
    assert e2e.ok("approve", row["session"][:6], row["call_id"]).stdout.strip() == f"approved {row['call_id']}"
    out.until(lambda line: "approved by roost-cli#" in line)
    [question] = wait_until(lambda: pending(e2e), what="the question")
    assert (question["kind"], question["question"], question["choices"]) == ("human", "Colour?", ["red", "blue"])
    e2e.ok("answer", question["session"], question["call_id"], "blue")
    out.until(lambda line: "answered by roost-cli#" in line and "blue" in line)
    assert watcher.wait(timeout=10) == 0
    assert (e2e.project / "made.txt").read_text() == "hi\n"

    again = e2e.roost("approve", row["session"], row["call_id"])
    assert again.returncode == 10 and "already answered: approve by roost-cli#" in again.stderr


def test_requests_are_named_by_what_tells_them_apart(e2e: E2E) -> None:
    nobody = e2e.roost("approve")
    assert nobody.returncode == 2 and "no open permission request" in nobody.stderr
    first = json.loads(e2e.ok("dispatch", "one", "--model", e2e.script([bash("echo 1")], [text("a")]), "--detach", "--json").stdout)
    [row] = wait_until(lambda: pending(e2e), what="the first request")
    second = json.loads(e2e.ok("dispatch", "two", "--model", e2e.script([bash("echo 2")], [text("b")]), "--detach", "--json").stdout)
    rows = wait_until(lambda: pending(e2e) if len(pending(e2e)) == 2 else None, what="the second request")
    two = e2e.roost("approve")
    assert two.returncode == 2 and "2 permission requests are open: name one" in two.stderr
    assert all(f"{r['session']} {r['call_id']} bash echo" in two.stderr for r in rows)
    # The session alone, when it waits on one request.
    assert e2e.ok("approve", first["session"][:5]).stdout.strip() == f"approved {row['call_id']}"
    wait_until(lambda: e2e.session_row(first["session"])["status"] == "done", what="the first run")
    # The call alone, by the start of its id; a question is not a permission request.
    [other] = pending(e2e)
    assert other["session"] == second["session"]
    assert e2e.roost("answer", other["call_id"][:8], "hello").returncode == 2
    assert e2e.ok("deny", other["call_id"][:8]).stdout.strip() == f"denied {other['call_id']}"
    wait_until(lambda: e2e.session_row(second["session"])["status"] == "done", what="the second run")
    assert [e["is_error"] for e in e2e.events(second["session"]) if e["type"] == "tool.finished"] == [True]


def test_deny_with_a_reason_and_the_model_sees_it(e2e: E2E) -> None:
    model = e2e.script([bash("rm -rf build")], [text("OK, I will not.")])
    watcher = e2e.popen([ROOST, "dispatch", "clean", "--model", model, "--json"], stdout=subprocess.PIPE)
    [row] = wait_until(lambda: pending(e2e), what="the open request")
    e2e.ok("deny", row["session"], row["call_id"], "--reason", "keep the build")
    assert watcher.wait(timeout=10) == 0
    events = [json.loads(line) for line in watcher.stdout.read().splitlines()]
    [result] = [e for e in events if e["type"] == "tool.finished"]
    assert result["is_error"] and result["result"].endswith(": keep the build")
    assert events[-1]["type"] == "run.finished" and events[-1]["text"] == "OK, I will not."


def test_rules_and_yes_on_the_command_line(e2e: E2E) -> None:
    model = e2e.script([bash("echo allowed")], [bash("git push --force")], [text("end")])
    done = e2e.roost("dispatch", "go", "--model", model, "--allow", "bash(echo *)", "--deny", "bash(git push*)", "--json")
    events = [json.loads(line) for line in done.stdout.splitlines()]
    results = [(e["is_error"], e["result"]) for e in events if e["type"] == "tool.finished"]
    assert results[0] == (False, "allowed\n")
    assert results[1][0] and "rule deny bash(git push*) (from dispatch)" in results[1][1]
    assert not [e for e in events if e["type"] == "permission.requested"]
    bad = e2e.roost("dispatch", "go", "--model", model, "--allow", "bash(")
    assert bad.returncode == 10 and "not a rule" in bad.stderr


def test_a_request_stays_open_across_a_killed_daemon(e2e: E2E) -> None:
    model = e2e.script([bash("echo survived > after.txt")], [text("Carried on.")])
    session = json.loads(e2e.ok("dispatch", "go", "--model", model, "--detach", "--json").stdout)["session"]
    [row] = wait_until(lambda: pending(e2e), what="the open request")
    old = e2e.status()["pid"]
    os.kill(old, signal.SIGKILL)
    wait_until(lambda: not alive(old), 5, what="the daemon to die")
    # The next command starts a new daemon; the request is still open and answerable.
    assert [r["call_id"] for r in pending(e2e)] == [row["call_id"]]
    assert e2e.status()["pid"] != old
    e2e.ok("approve", session, row["call_id"])
    wait_until(lambda: e2e.session_row(session)["status"] == "done", what="the run to finish")
    assert (e2e.project / "after.txt").read_text() == "survived\n"
    assert e2e.events(session)[-1]["text"] == "Carried on."


def test_the_terminal_that_dispatched_asks_and_answers(e2e: E2E) -> None:
    from .test_shell import Tmux  # the shell tests' tmux server: a real terminal

    tmux = Tmux(e2e)
    try:
        model = e2e.script([bash("echo hi > made.txt")], [{"type": "tool_use", "name": "ask_human", "input": {"question": "Colour?", "choices": ["red", "blue"]}}], [text("Done.")])
        pane = tmux.open("dispatch", "make-a-file", "--model", model)
        pane.wait("y approve once · s/a for the session")
        assert not (e2e.project / "made.txt").exists()
        pane.keys("y")  # one key, no Enter
        pane.wait("2. blue")
        pane.submit("2")
        screen = pane.wait("[exit 0]")
        assert "answered by roost-cli#" in screen and "blue" in screen
        assert (e2e.project / "made.txt").read_text() == "hi\n"
    finally:
        tmux.kill()


def test_dispatch_at_a_terminal_approves_for_the_session_with_any_arguments_each_fact_once(e2e: E2E) -> None:
    from .test_shell import Tmux

    tmux = Tmux(e2e)
    try:
        model = e2e.script([bash("echo one")], [bash("echo two words")], [bash("rm -f x")], [text("Done.")])
        pane = tmux.open("dispatch", "echo-things", "--model", model)
        pane.wait("y approve once · s/a for the session (exactly this, or with any arguments) · n deny ›")
        pane.keys("x")  # not an answer: the question stays
        pane.keys("s")
        screen = pane.wait("1 / 2 (Esc: back) ›")
        assert "    1  exactly this: bash(echo one)\n" in screen
        assert "    2  with any arguments: bash(echo *)  (also allows echo with any other arguments)\n" in screen
        pane.keys("2")
        # echo with other arguments runs without asking; rm still asks.
        screen = pane.wait("? bash rm -f x waits for approval")
        assert "for the session (bash(echo *))" in screen
        assert "→ bash echo two words" in screen
        pane.keys("n")
        pane.wait("reason (the model sees it)")
        pane.keys("Enter")
        screen = pane.wait("[exit 0]")
        # Each fact once: the rules offered, and no roost approve hint where the terminal asks.
        assert screen.count("bash(echo one)") == 1 and "roost approve" not in screen
        assert screen.count("waits for approval") == 2
    finally:
        tmux.kill()


def test_dispatch_shows_the_diff_of_each_edit_in_every_mode(e2e: E2E) -> None:
    for mode in ("full", "exec", "agent"):
        (e2e.project / "f.py").write_text("def f():\n    return 1\n")
        (e2e.project / "check.sh").write_text("#!/bin/sh\nexit 0\n")
        (e2e.project / "check.sh").chmod(0o755)
        edit = {"type": "tool_use", "name": "edit", "input": {"path": "f.py", "old": "    return 1", "new": "    return  2"}}
        model = e2e.script([edit], [text("Edited.")])
        args = ("--allow", "edit") if mode == "agent" else ()  # agent mode, allowed by a rule: no approval
        out = e2e.roost("dispatch", "edit f", "--model", model, "--mode", mode, *args).stdout
        assert "  -    return 1\n  +    return  2\n" in out.split("→ edit f.py")[-1], (mode, out)
        assert out.count("+    return  2") == 1


def test_approve_from_another_terminal_with_any_arguments_and_the_diff_shown_once(e2e: E2E) -> None:
    (e2e.project / "f.py").write_text("def f():\n    return 1\n")
    edit = {"type": "tool_use", "name": "edit", "input": {"path": "f.py", "old": "    return 1", "new": "    return  2"}}
    model = e2e.script([bash("git status --short")], [bash("git log -n 1")], [edit], [text("Done.")])
    watcher = e2e.popen([ROOST, "dispatch", "look", "--model", model], stdout=subprocess.PIPE)
    out = LineReader(watcher.stdout)
    offer = out.until(lambda line: "for the session:" in line)
    assert "bash(git status --short) (exactly this) or bash(git *) (with any arguments)" in offer
    assert "[--session-scope [--any-arguments]]" in out.until(lambda line: "roost approve" in line)
    [row] = wait_until(lambda: pending(e2e), what="the open request")
    assert row["session_rules_any"] == ["bash(git *)"]
    assert e2e.roost("approve", row["session"], row["call_id"], "--any-arguments").returncode == 2
    e2e.ok("approve", row["session"], row["call_id"], "--session-scope", "--any-arguments")
    # git log runs without asking; the edit asks, its diff shown with the request only.
    [edit_row] = wait_until(lambda: pending(e2e), what="the edit's request")
    assert edit_row["name"] == "edit"
    e2e.ok("approve", edit_row["session"], edit_row["call_id"])
    out.until(lambda line: line.startswith("■ done"))
    assert watcher.wait(timeout=10) == 0
    printed = "".join(out.lines)
    assert "→ bash git log -n 1" in printed and printed.count("+    return  2") == 1


def test_pending_shows_a_hostile_command_with_every_hidden_character_written_out(e2e: E2E) -> None:
    # A model (steered by a hostile repository) asks to run a command that would write the
    # clipboard (OSC 52) and, by a right-to-left override, read as another: `roost pending`
    # and the dispatch's guidance on stderr show it as it runs, escapes written out.
    hostile = "echo safe \u202e\x1b]52;c;ZXZpbA==\x07 #"
    model = e2e.script([bash(hostile)], [text("Done.")])
    started = json.loads(e2e.ok("dispatch", "go", "--model", model, "--detach", "--json").stdout)
    [row] = wait_until(lambda: pending(e2e), what="the open request")
    assert row["input"]["command"] == hostile
    listed = e2e.ok("pending").stdout
    assert "\x1b]" not in listed and "\u202e" not in listed and "\x07" not in listed
    assert "bash echo safe \\u202e\\x1b]52;c;ZXZpbA==\\x07 #" in listed
    e2e.ok("deny", started["session"])
