"""MCP end to end: real servers from PyPI and npm, the real daemon and CLI, the scripted model."""

from __future__ import annotations

import json
import os
import re
import signal

from tests.daemon.mcp.conftest import EVERYTHING_JS, TIME_EXE, _need

from .conftest import E2E, detach, text, wait_until


def use(name: str, **input: object) -> dict:
    return {"type": "tool_use", "name": name, "input": input}


def servers(e2e: E2E) -> dict[str, dict]:
    return {s["name"]: s for s in e2e.json_out("mcp", "--json")["servers"]}


def test_two_sessions_share_mcp_servers_that_survive_a_kill(e2e: E2E) -> None:
    _need(EVERYTHING_JS)
    _need(TIME_EXE)
    (e2e.project / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "time": {"command": str(TIME_EXE), "args": ["--local-timezone", "UTC"]},
        "everything": {"command": "node", "args": [str(EVERYTHING_JS), "stdio"]},
        "broken": {"command": "roost-no-such-server"},
    }}))
    e2e.ok("trust", "--yes")
    model = e2e.script(
        [use("time__get_current_time", timezone="UTC"), use("everything__echo", message="hello mcp")],
        [text("Done.")],
    )
    runs = [detach(e2e, f"task {n}", "--model", model) for n in range(2)]
    for session, _ in runs:
        events = e2e.wait_event(session, lambda e: e["type"] == "run.finished", timeout=30)
        assert events[-1]["reason"] == "done"
        results = {e["name"]: e for e in events if e["type"] == "tool.finished"}
        assert not results["time__get_current_time"]["is_error"]
        assert '"timezone": "UTC"' in results["time__get_current_time"]["result"]
        assert results["everything__echo"]["result"] == "Echo: hello mcp"
        assert "time__get_current_time" in next(e for e in events if e["type"] == "run.started")["tools"]

    listed = servers(e2e)
    assert listed["time"]["state"] == listed["everything"]["state"] == "ready"
    assert listed["broken"]["state"] == "failed" and "roost-no-such-server" in listed["broken"]["error"]
    # One connection (one process) per server, shared by both sessions.
    assert listed["everything"]["restarts"] == 0 and listed["everything"]["pid"]
    table = e2e.ok("mcp").stdout
    assert "everything" in table and "failed" in table

    old = listed["everything"]["pid"]
    os.kill(old, signal.SIGKILL)
    wait_until(lambda: servers(e2e)["everything"]["state"] == "ready" and servers(e2e)["everything"]["pid"] != old,
               15, what="the everything server to come back")
    again = e2e.script([use("everything__echo", message="back")], [text("ok")])
    session, _ = detach(e2e, "echo again", "--model", again)
    events = e2e.wait_event(session, lambda e: e["type"] == "run.finished", timeout=30)
    assert [e["result"] for e in events if e["type"] == "tool.finished"] == ["Echo: back"]

    restarted = e2e.ok("mcp", "restart", "time")
    assert restarted.returncode == 0
    assert servers(e2e)["time"]["state"] == "ready"


def test_mcp_tools_ask_in_agent_mode(e2e: E2E) -> None:
    _need(TIME_EXE)
    (e2e.project / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "time": {"command": str(TIME_EXE), "args": ["--local-timezone", "UTC"]},
    }}))
    e2e.ok("trust", "--yes")
    model = e2e.script([use("time__get_current_time", timezone="UTC")], [text("Done.")])
    session = json.loads(e2e.ok("dispatch", "time?", "--model", model, "--detach", "--json").stdout)["session"]
    [row] = wait_until(lambda: e2e.json_out("pending", "--json"), 20, what="the permission request")
    assert row["name"] == "time__get_current_time" and row["reason"] == "time__get_current_time asks in agent mode"
    e2e.ok("approve", session, row["call_id"])
    events = e2e.wait_event(session, lambda e: e["type"] == "run.finished", timeout=20)
    assert events[-1]["reason"] == "done"


def test_an_untrusted_mcp_json_starts_nothing_until_trusted(e2e: E2E) -> None:
    _need(EVERYTHING_JS)
    marker = e2e.project / "server-started"
    mcp_json = e2e.project / ".mcp.json"
    mcp_json.write_text(json.dumps({"mcpServers": {
        "ev": {"command": "sh", "args": ["-c", f'touch "{marker}"; exec node "{EVERYTHING_JS}" stdio']},
    }}))
    model = e2e.script([use("ev__echo", message="hi")], [text("Done.")])
    for mode in ("plan", "full"):
        done = e2e.ok("dispatch", "go", "--model", model, "--mode", mode, "--json")
        events = [json.loads(line) for line in done.stdout.splitlines()]
        notice = next(e for e in events if e["type"] == "project.untrusted")
        assert [(i["kind"], i["name"]) for i in notice["ignored"]] == [("mcp server", "ev")]
        assert "ev__echo" not in next(e for e in events if e["type"] == "run.started")["tools"]
    assert not marker.exists()
    listed = servers(e2e)
    assert listed["ev"]["state"] == "untrusted" and listed["ev"]["pid"] is None
    assert "not trusted, so ignored: mcp server ev" in e2e.ok("mcp").stderr

    e2e.ok("trust", "--yes")
    done = e2e.ok("dispatch", "go", "--model", e2e.script([use("ev__echo", message="hi")], [text("Done.")]), "--yes")
    assert "Echo: hi" in done.stdout and marker.exists()
    # A pull adds an argument: the server is someone else's word again.
    mcp_json.write_text(mcp_json.read_text().replace("stdio", "stdio --more"))
    assert servers(e2e)["ev"]["state"] == "untrusted"


def test_roost_mcp_fits_long_names_and_shows_why_a_server_exited(e2e: E2E) -> None:
    _need(EVERYTHING_JS)
    long = "a-server-with-a-name-much-longer-than-any-column-was-made-for"
    (e2e.project / ".mcp.json").write_text(json.dumps({"mcpServers": {
        long: {"command": "node", "args": [str(EVERYTHING_JS), "stdio"]},
        "quits": {"command": "sh", "args": ["-c", "echo 'Error: FETCH_API_KEY is not set' >&2; exit 1"]},
    }}))
    e2e.ok("trust", "--yes")
    e2e.ok("dispatch", "go", "--model", e2e.script([text("Done.")]))
    wait_until(lambda: servers(e2e)["quits"]["stderr"], 20, what="the quitting server's stderr")
    lines = e2e.ok("mcp").stdout.splitlines()
    head, rows = lines[0], {line.split()[0]: line for line in lines[1:] if not line.startswith(" ")}
    # Every column starts where its heading does, whatever the longest name.
    at = head.index("STATE")
    assert rows[long][at:].startswith("ready ") and rows[long][at - 2:at] == "  ", lines
    # (Between retries it is failed; a retry may be under way.)
    assert rows["quits"][at:].split()[0] in ("failed", "starting"), lines
    assert rows[long].index("pid ") == head.index("PID / URL"), lines
    assert "closed the connection before it was ready" in rows["quits"]
    # The server's last words, under its row.
    below = lines[lines.index(rows["quits"]) + 1]
    assert below.strip() == "| Error: FETCH_API_KEY is not set"


def test_roost_mcp_resources_and_commands_show_what_servers_offer(e2e: E2E) -> None:
    _need(EVERYTHING_JS)
    (e2e.project / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "ev": {"command": "node", "args": [str(EVERYTHING_JS), "stdio"]},
    }}))
    # Untrusted: nothing offered, and nothing started.
    assert "no MCP resources here" in e2e.ok("mcp", "resources").stdout
    assert "mcp__ev__" not in e2e.ok("commands").stdout
    e2e.ok("trust", "--yes")
    listed = e2e.json_out("mcp", "resources", "--json")["resources"]
    reference = "@ev:demo://resource/static/document/architecture.md"
    assert reference in [r["reference"] for r in listed]
    table = e2e.ok("mcp", "resources").stdout
    assert any(line.startswith(reference + "  architecture.md · text/markdown") for line in table.splitlines()), table
    commands = e2e.ok("commands").stdout
    assert "/mcp__ev__args-prompt city [state]  (mcp prompt)" in commands and "MCP server ev" in commands


def test_the_shell_lists_completes_and_runs_a_servers_prompt(e2e: E2E) -> None:
    from .test_shell import IDLE, Tmux, runs_done  # the shell tests' tmux server: a real terminal

    _need(EVERYTHING_JS)
    (e2e.project / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "ev": {"command": "node", "args": [str(EVERYTHING_JS), "stdio"]},
    }}))
    e2e.ok("trust", "--yes")
    tmux = Tmux(e2e)
    try:
        pane = tmux.open("shell", "--model", e2e.script([text("Sunny.")]), "--mode", "full")
        pane.wait(IDLE)
        pane.submit("/help")
        screen = pane.wait("/mcp__ev__args-prompt")
        assert re.search(r"/mcp__ev__args-prompt city \[state\] +A prompt with two arguments", screen), screen
        pane.type("/mcp__ev__ar")
        pane.wait("args-prompt  city [state]")  # the completion menu
        pane.keys("Tab")
        pane.submit(" Paris")
        screen = pane.wait(runs_done(1))
        assert "What's weather in Paris?" in screen and "Sunny." in screen
    finally:
        tmux.kill()
