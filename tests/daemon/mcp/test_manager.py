"""McpManager against real servers over stdio: tools, calls, failures, restarts, shutdown,
servers keyed by what they are, and unused ones stopped."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any, Mapping

import pytest
import trio

from roost.daemon.mcp import McpManager, McpServerConfig, UnknownServer, _manager
from tests._procs import alive

from .conftest import everything, time_server

Servers = Mapping[str, McpServerConfig]


def _by_name(manager: McpManager, servers: Servers) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in manager.status(servers)}


async def _env(manager: McpManager, name: str, servers: Servers) -> dict[str, str]:
    """What server-everything's get-env says, called as ``name`` through ``servers``."""
    result = await manager.call(f"{name}__get-env", {}, servers=servers)
    assert not result.is_error, result.text
    return json.loads(result.text)


async def _wait_for(predicate: Any, timeout: float = 15) -> None:
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.02)


async def test_stdio_servers_share_tools_and_answer(manager: McpManager, tmp_path: Path) -> None:
    servers = {"time": time_server(), "everything": everything()}
    await manager.ensure(servers)
    status = _by_name(manager, servers)
    assert {s["state"] for s in status.values()} == {"ready"}, status
    for s in status.values():
        assert s["pid"] and alive(s["pid"]) and s["tools"] > 0 and s["error"] is None
        assert s["transport"] == "stdio" and s["restarts"] == 0 and Path(s["log"]).is_file()

    names = {t.name for t in manager.tools(servers)}
    assert {"time__get_current_time", "time__convert_time", "everything__echo"} <= names
    echo = next(t for t in manager.tools(servers) if t.name == "everything__echo")
    assert (echo.server, echo.tool, echo.description) == ("everything", "echo", "Echoes back the input string")
    assert echo.input_schema["properties"]["message"]["type"] == "string"
    # server-everything names tools with '-', which providers accept as is
    assert "everything__trigger-long-running-operation" in names

    now = await manager.call("time__get_current_time", {"timezone": "Europe/Paris"}, servers=servers)
    assert not now.is_error and now.meta["structured"]["timezone"] == "Europe/Paris"
    assert now.text.count("Europe/Paris") == 1  # structured content not repeated when a text block has it
    said = await manager.call("everything__echo", {"message": "hello"}, servers=servers)
    assert (said.text, said.is_error) == ("Echo: hello", False)

    # filters: exact names and server globs
    assert {t.server for t in manager.tools(servers, ["time__*"])} == {"time"}
    assert [t.name for t in manager.tools(servers, ["everything__echo", "nope__*"])] == ["everything__echo"]
    assert manager.tools(servers, []) == []
    # only the servers of the map given: another project's config sees its own
    assert manager.tools({"time": time_server()}, ["everything__*"]) == []
    # the status of a project's config: running servers as they are, others stopped
    listing = manager.status({"time": time_server(), "other": everything("other", args=())})
    assert [(s["name"], s["state"]) for s in listing] == [("other", "stopped"), ("time", "ready")]
    assert manager.status({"time": time_server(args=())})[0]["state"] == "stopped"  # another server


async def test_two_tasks_share_one_connection(manager: McpManager) -> None:
    servers = {"everything": everything()}
    await manager.ensure(servers)
    pid = _by_name(manager, servers)["everything"]["pid"]
    order: list[str] = []
    first_progress = trio.Event()

    async def slow() -> None:
        result = await manager.call(
            "everything__trigger-long-running-operation",
            {"duration": 0.8, "steps": 4},
            servers=servers,
            on_progress=lambda p: first_progress.set(),
        )
        assert not result.is_error, result.text
        order.append("slow")

    async def quick() -> None:
        await first_progress.wait()  # the slow call is in flight on the same connection
        result = await manager.call("everything__echo", {"message": "meanwhile"}, servers=servers)
        assert result.text == "Echo: meanwhile"
        order.append("quick")

    async with trio.open_nursery() as n:
        n.start_soon(slow)
        n.start_soon(quick)
    assert order == ["quick", "slow"]
    status = _by_name(manager, servers)["everything"]
    assert (status["pid"], status["restarts"]) == (pid, 0)


async def test_progress_notifications_reach_the_caller(manager: McpManager) -> None:
    servers = {"everything": everything()}
    await manager.ensure(servers)
    seen: list[dict[str, Any]] = []
    result = await manager.call(
        "everything__trigger-long-running-operation",
        {"duration": 0.3, "steps": 3},
        servers=servers,
        on_progress=seen.append,
    )
    assert not result.is_error and "completed" in result.text
    # the last one races the result (the SDK delivers them from its own tasks): one that
    # comes after the result is dropped, so nothing is heard of a call once it returned
    count = len(seen)
    assert [p["progress"] for p in seen] in ([1, 2], [1, 2, 3])
    assert {p["total"] for p in seen} == {3} and {p["message"] for p in seen} == {None}
    await trio.sleep(0.1)
    assert len(seen) == count


async def test_a_call_over_its_timeout_is_an_error_and_the_server_goes_on(manager: McpManager) -> None:
    servers = {"everything": everything(timeout=0.3)}
    await manager.ensure(servers)
    with trio.fail_after(5):
        result = await manager.call(
            "everything__trigger-long-running-operation", {"duration": 0.6, "steps": 1}, servers=servers
        )
    assert result.is_error and "timed out after 0.3 s" in result.text and result.meta["timeout"]
    # the argument overrides the config's timeout
    result = await manager.call(
        "everything__trigger-long-running-operation", {"duration": 0.4, "steps": 1}, servers=servers, timeout=10
    )
    assert not result.is_error
    # the timeout is the caller's config's: the same server, configured with the default
    longer = {"everything": everything()}
    result = await manager.call(
        "everything__trigger-long-running-operation", {"duration": 0.4, "steps": 1}, servers=longer
    )
    assert not result.is_error
    echo = await manager.call("everything__echo", {"message": "still here"}, servers=servers)
    assert echo.text == "Echo: still here"


async def test_cancelling_the_caller_cancels_the_call(manager: McpManager) -> None:
    servers = {"everything": everything()}
    await manager.ensure(servers)
    started = trio.Event()
    with trio.fail_after(5):
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as n:

                async def call() -> None:
                    await manager.call(
                        "everything__trigger-long-running-operation",
                        {"duration": 0.6, "steps": 6},
                        servers=servers,
                        on_progress=lambda p: started.set(),
                    )
                    pytest.fail("the call was not cancelled")

                n.start_soon(call)
                await started.wait()
                scope.cancel()
    assert scope.cancelled_caught
    assert (await manager.call("everything__echo", {"message": "after"}, servers=servers)).text == "Echo: after"
    assert _by_name(manager, servers)["everything"]["restarts"] == 0


async def test_errors_become_error_results(manager: McpManager) -> None:
    servers = {"time": time_server()}
    await manager.ensure(servers)
    # an error the server reports as a result (isError)
    bad_zone = await manager.call("time__get_current_time", {"timezone": "Not/AZone"}, servers=servers)
    assert bad_zone.is_error and "Invalid timezone" in bad_zone.text
    # an MCP error response (the server does not know the tool)
    unknown = await manager.call("time__no_such_tool", {}, servers=servers)
    assert unknown.is_error and "MCP error" in unknown.text and "Unknown tool" in unknown.text
    # names that reach no server of the caller's: a running server of a config the caller
    # does not have is not reached either
    for name, expected, mine in (("nope__x", "no MCP server named nope here (configured: time)", servers),
                                 ("time__get_current_time", "no MCP server named time here (configured: none)", {}),
                                 ("plain", "not an MCP tool name", servers)):
        result = await manager.call(name, {"timezone": "UTC"}, servers=mine)
        assert result.is_error and expected in result.text, result.text


async def test_images_and_structured_content(manager: McpManager) -> None:
    servers = {"everything": everything()}
    await manager.ensure(servers)
    image = await manager.call("everything__get-tiny-image", {}, servers=servers)
    assert not image.is_error
    assert image.parts, image.text
    [picture] = image.parts
    assert picture.kind == "image" and picture.media_type == "image/png" and picture.data.startswith(b"\x89PNG")
    assert f"[image {picture.width}x{picture.height}, 1 KB]" in image.text
    weather = await manager.call("everything__get-structured-content", {"location": "New York"}, servers=servers)
    assert set(weather.meta["structured"]) == {"temperature", "conditions", "humidity"}
    assert weather.text.count("humidity") == 1  # sent as text and as structured content: once


async def test_a_killed_server_comes_back_and_its_tools_work_again(manager: McpManager) -> None:
    servers = {"everything": everything(), "other": everything("other", env={"ROOST_TEST": "other"})}
    await manager.ensure(servers)
    before = _by_name(manager, servers)["everything"]["pid"]
    os.kill(before, signal.SIGKILL)
    await _wait_for(lambda: _by_name(manager, servers)["everything"]["state"] != "ready")
    # its tools are withdrawn while it is down (0.5 s of backoff at least); the other's stay
    names = {t.name for t in manager.tools(servers)}
    assert "everything__echo" not in names and "other__echo" in names
    # a call meanwhile waits for the server (within its timeout)
    assert (await manager.call("everything__echo", {"message": "back"}, servers=servers)).text == "Echo: back"
    after = _by_name(manager, servers)["everything"]
    assert after["state"] == "ready" and after["restarts"] == 1 and after["pid"] and alive(after["pid"])
    assert "everything__echo" in {t.name for t in manager.tools(servers)}
    assert _by_name(manager, servers)["other"]["restarts"] == 0
    assert "the connection closed" in Path(after["log"]).read_text()


async def test_a_server_that_cannot_start_fails_without_blocking_others(manager: McpManager) -> None:
    missing = everything("broken", command="roost-no-such-mcp-server", args=())
    servers = {"broken": missing, "everything": everything()}
    with trio.fail_after(20):
        await manager.ensure(servers)
    status = _by_name(manager, servers)
    assert status["everything"]["state"] == "ready"
    # It is retried with backoff (0.5 s, then more): while the other server started it may
    # have gone back to "starting"; between tries it is failed.
    with trio.fail_after(10):
        while (status := _by_name(manager, servers))["broken"]["state"] != "failed":
            await trio.sleep(0.01)
    assert status["broken"]["pid"] is None
    assert "cannot start 'roost-no-such-mcp-server'" in status["broken"]["error"]
    assert {t.server for t in manager.tools(servers)} == {"everything"}
    result = await manager.call("broken__anything", {}, servers=servers)
    assert result.is_error and "failed to start" in result.text and "roost-no-such-mcp-server" in result.text
    assert "cannot start" in Path(status["broken"]["log"]).read_text()


async def test_a_server_that_exits_at_once_is_failed(manager: McpManager) -> None:
    servers = {"quitter": everything("quitter", command="sh", args=("-c", "echo going away >&2; exit 3"))}
    await manager.ensure(servers)
    status = _by_name(manager, servers)["quitter"]
    assert status["state"] == "failed" and "closed the connection before it was ready" in status["error"]
    assert "going away" in Path(status["log"]).read_text() and status["stderr"] == ["going away"]


async def test_environment_reaches_a_stdio_server(manager: McpManager, tmp_path: Path) -> None:
    servers = {"everything": everything(env={"ROOST_TEST_VALUE": "42"}, cwd=str(tmp_path))}
    await manager.ensure(servers)
    shown = (await manager.call("everything__get-env", {}, servers=servers)).text
    assert '"ROOST_TEST_VALUE": "42"' in shown and '"PATH"' in shown  # merged over the SDK's defaults
    assert f'"HOME": "{os.environ["HOME"]}"' in shown


async def test_tool_list_changes_are_picked_up(manager: McpManager) -> None:
    # server-everything registers more tools once initialized and announces the change
    servers = {"everything": everything()}
    await manager.ensure(servers)
    log = Path(_by_name(manager, servers)["everything"]["log"])
    await _wait_for(lambda: "tool list changed" in log.read_text(), timeout=5)
    assert "everything__simulate-research-query" in {t.name for t in manager.tools(servers)}


async def test_restart_and_config_changes(manager: McpManager) -> None:
    servers = {"everything": everything()}
    await manager.ensure(servers)
    first = _by_name(manager, servers)["everything"]["pid"]
    await manager.restart(servers["everything"])
    second = _by_name(manager, servers)["everything"]
    assert second["state"] == "ready" and second["restarts"] == 1 and second["pid"] != first
    await _wait_for(lambda: not alive(first), timeout=10)

    # the same config again: nothing happens
    await manager.ensure({"everything": everything()})
    assert _by_name(manager, servers)["everything"]["pid"] == second["pid"]
    # a changed one is another server: started beside the first, which another session
    # may still use (it is stopped once unused: see the next tests)
    changed = {"everything": everything(env={"CHANGED": "1"})}
    await manager.ensure(changed)
    third = _by_name(manager, changed)["everything"]
    assert third["state"] == "ready" and third["pid"] not in (first, second["pid"])
    assert alive(second["pid"]) and _by_name(manager, servers)["everything"]["pid"] == second["pid"]

    # disabled: stopped for that config, and said so to the model
    disabled = {"everything": everything(env={"CHANGED": "1"}, enabled=False)}
    await manager.ensure(disabled)
    stopped = _by_name(manager, disabled)["everything"]
    assert (stopped["state"], stopped["enabled"], stopped["pid"]) == ("stopped", False, None)
    result = await manager.call("everything__echo", {"message": "x"}, servers=disabled)
    assert result.is_error and "disabled in test" in result.text
    with pytest.raises(UnknownServer):
        await manager.restart(disabled["everything"])
    with pytest.raises(UnknownServer, match="MCP server nope is not running"):
        await manager.restart(everything("nope", args=("--nope",)))


async def test_servers_are_what_they_run_never_their_name(manager: McpManager, tmp_path: Path) -> None:
    # Two projects' servers of one name: two servers, each project reaching its own.
    mine = {"probe": everything("probe", env={"ROOST_PROJECT": "mine"}, source="mine/.mcp.json")}
    theirs = {"probe": everything("probe", env={"ROOST_PROJECT": "theirs"}, source="theirs/.mcp.json")}
    await manager.ensure(mine)
    await manager.ensure(theirs)
    assert (await _env(manager, "probe", mine))["ROOST_PROJECT"] == "mine"
    assert (await _env(manager, "probe", theirs))["ROOST_PROJECT"] == "theirs"
    a, b = _by_name(manager, mine)["probe"], _by_name(manager, theirs)["probe"]
    assert a["pid"] != b["pid"] and alive(a["pid"]) and alive(b["pid"])
    # each has its own log, named after the server and its identity
    assert a["log"] != b["log"] and Path(a["log"]).is_file() and Path(b["log"]).is_file()
    assert Path(a["log"]).name.startswith("mcp-probe-")

    # The same server under another name, from another file, with another timeout: one
    # connection, its tools under the caller's name.
    alias = {"other": everything("other", env={"ROOST_PROJECT": "mine"}, source="user", timeout=5)}
    await manager.ensure(alias)
    assert _by_name(manager, alias)["other"]["pid"] == a["pid"]
    assert "other__echo" in {t.name for t in manager.tools(alias)}
    assert not any(t.name.startswith("probe__") for t in manager.tools(alias))
    assert (await _env(manager, "other", alias))["ROOST_PROJECT"] == "mine"
    said = await manager.call("other__echo", {"message": "hi"}, servers=alias)
    assert (said.text, said.meta["server"]) == ("Echo: hi", "other")


async def test_a_server_no_config_has_is_stopped_once_unused(
    manager: McpManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_manager, "IDLE_STOP", 0)
    first = {"s": everything("s", env={"V": "1"}, source="p/.mcp.json")}
    edited = {"s": everything("s", env={"V": "2"}, source="p/.mcp.json")}
    elsewhere = {"s": everything("s", env={"V": "3"}, source="q/.mcp.json")}
    await manager.ensure(first)
    await manager.ensure(elsewhere)
    old = _by_name(manager, first)["s"]["pid"]
    # The entry's file is edited while a run still holds the old server: it stays.
    with manager.hold(first):
        await manager.ensure(edited)
        await manager.ensure(edited)
        assert alive(old) and _by_name(manager, first)["s"]["state"] == "ready"
        assert (await _env(manager, "s", first))["V"] == "1"
    # Let go, and no entry's latest config: stopped when ensure next runs.
    await manager.ensure(edited)
    await _wait_for(lambda: not alive(old), timeout=10)
    assert _by_name(manager, first)["s"]["state"] == "stopped"
    # Another entry's server, and the edited one, are still their entries' latest.
    assert {_by_name(manager, s)["s"]["state"] for s in (edited, elsewhere)} == {"ready"}
    # A disabled entry is no server's latest config either.
    current = _by_name(manager, edited)["s"]["pid"]
    await manager.ensure({"s": everything("s", env={"V": "2"}, source="p/.mcp.json", enabled=False)})
    await _wait_for(lambda: not alive(current), timeout=10)
    assert _by_name(manager, elsewhere)["s"]["state"] == "ready"


async def test_a_recent_server_is_kept_even_when_no_config_has_it(manager: McpManager) -> None:
    first = {"s": everything("s", env={"V": "1"})}
    await manager.ensure(first)
    await manager.ensure({"s": everything("s", env={"V": "2"})})
    await manager.ensure({"s": everything("s", env={"V": "2"})})
    # used less than IDLE_STOP ago: kept, in case a session still wants it
    assert _by_name(manager, first)["s"]["state"] == "ready"


async def test_aclose_leaves_no_process(nursery: trio.Nursery, tmp_path: Path) -> None:
    manager = McpManager(nursery, tmp_path / "logs")
    servers = {"time": time_server(), "everything": everything(), "b": everything("b", env={"B": "1"})}
    await manager.ensure(servers)
    pids = [s["pid"] for s in manager.status(servers)]
    assert len(set(pids)) == 3 and all(alive(p) for p in pids)
    with trio.fail_after(15):
        await manager.aclose()
    assert not any(alive(p) for p in pids)
    assert {s["state"] for s in manager.status(servers)} == {"stopped"}
    again = {"again": everything("again", args=("--again",))}
    await manager.ensure(again)  # closed: starts nothing
    assert manager.tools(again) == [] and manager.status(again)[0]["state"] == "stopped"
