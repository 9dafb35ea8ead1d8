"""The sandbox for real: bubblewrap around real bash, through the tool and through a real
daemon. What a command may write, see and reach; what a project may change about it; what
happens where bwrap is missing; auto_allow. (One sandbox per run, its spawner, and a
project's hooks inside it: test_run_sandbox.py.)"""

from __future__ import annotations

import os
import secrets
import shutil
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import trio

from roost.daemon.rpc._server import Daemon
from roost.daemon.sandbox import Bubblewrap, RunSandbox, Sandbox, build_policy
from roost.daemon.tools import ToolContext, ToolRegistry
from roost.protocol.trio_client import TrioClient, open_client
from tests._procs import with_marker

from .conftest import bash, events_until, finished, text, write_script

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (.ci/run installs it)")

#: A command that succeeds only inside the sandbox: there, pid 1 is bwrap.
INSIDE = "tr '\\0' ' ' < /proc/1/cmdline | grep -q bwrap"


def user_config(text: str) -> None:
    path = Path(os.environ["XDG_CONFIG_HOME"]) / "roost" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


async def run(client: TrioClient, cwd: Path, *steps: list[dict[str, Any]], **params: Any) -> list[dict[str, Any]]:
    """Dispatch a scripted run of ``steps`` (then "done") in ``cwd``; its events."""
    model = write_script(cwd, *steps, [text("done")], name=f"s-{secrets.token_hex(3)}.json")
    params = {"yes": True, **params}
    started = await client.call("dispatch", task="t", model=model, cwd=str(cwd), attach=True, **params)
    return await events_until(client, finished(started["run"]))


def results(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "tool.finished"]


def sandbox_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next(e for e in events if e["type"] == "run.started")["sandbox"]


# -- through the tool ----------------------------------------------------------------------


@asynccontextmanager
async def sandboxed(cwd: Path, bwrap: str | None = None, **policy: Any) -> AsyncIterator[ToolContext]:
    """The context of a tool call in a run's sandbox (a run in ``cwd``), while it lasts."""
    sandbox = Sandbox(Bubblewrap(bwrap))
    await sandbox.probe()
    confined = sandbox.confine(build_policy(str(cwd), **policy))
    assert confined is not None
    async with RunSandbox(confined, str(cwd)) as box:
        yield ToolContext(str(cwd), sandbox=box)


async def test_the_folder_is_writable_and_nothing_else(tmp_path: Path, project: Path) -> None:
    tools = ToolRegistry()
    async with sandboxed(project) as ctx:
        made = await tools.call("bash", {"command": f"echo hi > made.txt && {INSIDE}"}, ctx)
        assert not made.is_error and (project / "made.txt").read_text() == "hi\n"
        assert made.meta["sandbox"] == "workspace"
        target = f"/var/roost-sandbox-{secrets.token_hex(4)}"
        refused = await tools.call("bash", {"command": f"touch {target}"}, ctx)
        assert refused.is_error and "Read-only file system" in refused.text
        assert f"[the sandbox (workspace) may be why this failed: commands may write only in {project}" in refused.text
        assert not os.path.exists(target)
        # Beside the folder is only the private /tmp: the write lands there and vanishes.
        beside = await tools.call("bash", {"command": "echo x > ../beside.txt && cat ../beside.txt"}, ctx)
        assert beside.text == "x\n" and not (tmp_path / "beside.txt").exists()


async def test_tmp_is_private(project: Path) -> None:
    mine = Path(f"/tmp/roost-host-{secrets.token_hex(4)}")
    mine.write_text("host")
    try:
        async with sandboxed(project) as ctx:
            listed = await ToolRegistry().call("bash", {"command": f"ls -A /tmp; echo sandboxed > /tmp/{mine.name}-2"}, ctx)
        assert not listed.is_error and mine.name not in listed.text
        assert not Path(f"{mine}-2").exists()
    finally:
        mine.unlink()


async def test_a_timeout_ends_every_process_of_the_sandbox(project: Path) -> None:
    marker = f"3{secrets.randbelow(10**6)}.25"
    command = f"sleep {marker} & setsid sleep {marker} & sleep {marker}; wait"
    async with sandboxed(project) as ctx:
        with trio.fail_after(10):
            ended = await ToolRegistry().call("bash", {"command": command, "timeout": 0.5}, ctx)
        assert ended.meta["timed_out"]
        # Even the one that left the process group, while the run's sandbox goes on: the
        # spawner ends what is left once no command runs.
        with trio.fail_after(2):
            while with_marker(marker):
                await trio.sleep(0.01)


async def test_without_a_sandbox_a_command_is_not_run_and_the_reason_says_the_way_out(project: Path) -> None:
    async with sandboxed(project, "/nonexistent/bwrap") as ctx:
        result = await ToolRegistry().call("bash", {"command": "touch made"}, ctx)
    assert result.is_error and result.text.startswith(
        "not run: the sandbox cannot start: /nonexistent/bwrap not found (install the bubblewrap package). "
    )
    assert 'dispatch with --sandbox off, or set [sandbox] mode = "off" in config.toml' in result.text
    assert not (project / "made").exists()


# -- through the daemon --------------------------------------------------------------------


async def test_credentials_are_not_there_even_in_a_session_at_home(client: TrioClient) -> None:
    home = Path(os.environ["HOME"])
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    (home / "notes.txt").write_text("mine\n")
    events = await run(client, home, [bash("cat notes.txt; ls -A .ssh; cat ~/.ssh/id_rsa")])
    (result,) = results(events)
    assert result["is_error"] and "PRIVATE KEY" not in result["result"]
    assert result["result"].startswith("mine\ncat: ")
    assert f"{home / '.ssh'} is hidden" in result["result"]
    assert sandbox_of(events)["home"] == str(home) and not sandbox_of(events)["hide_home"]


async def test_the_daemons_files_are_not_there(nursery: trio.Nursery, tmp_path: Path) -> None:
    # A session whose folder holds the daemon's socket, database, state and config.
    socket = tmp_path / "run" / "s.sock"
    (tmp_path / "state" / "roost").mkdir(parents=True)
    (tmp_path / "state" / "roost" / "kept.txt").write_text("the daemon's\n")
    # ssh's control sockets of `roost --host` connections lie beside the socket.
    (tmp_path / "run" / "ssh").mkdir(parents=True)
    (tmp_path / "run" / "ssh" / "control-abc").write_text("a master connection\n")
    user_config("# mine\n")
    reach = f"python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"{socket}\")'"
    look = "ls -A run run/ssh; cat roost.db; ls -A state/roost config/roost"
    async with serving(nursery, Daemon(socket, tmp_path / "roost.db")) as client:
        events = await run(client, tmp_path, [bash(look)], [bash(reach)])
    listed, reached = results(events)
    assert "roost.db: Permission denied" in listed["result"] and "SQLite" not in listed["result"]
    assert "kept.txt" not in listed["result"] and "config.toml" not in listed["result"]
    assert "control-abc" not in listed["result"]
    assert reached["is_error"] and "Error" in reached["result"]


async def test_there_is_no_network_not_even_to_this_machine(client: TrioClient, project: Path) -> None:
    accepted = []
    async with trio.open_nursery() as nursery:
        (listener,) = await nursery.start(partial(trio.serve_tcp, partial(_count, accepted), 0, host="127.0.0.1"))
        port = listener.socket.getsockname()[1]
        connect = bash(f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")
        (refused,) = results(await run(client, project, [connect]))
        assert refused["is_error"] and "connected" not in refused["result"]
        assert "there is no network" in refused["result"] and accepted == []
        # The same command where the user's config lets the network in.
        user_config("[sandbox]\nnetwork = true\n")
        events = await run(client, project, [connect])
        assert results(events)[0]["result"] == "connected\n" and accepted == [1]
        assert sandbox_of(events)["network"] is True
        # A project cannot let it in, and may shut it again.
        (project / ".roost").mkdir()
        (project / ".roost" / "config.toml").write_text("[sandbox]\nnetwork = false\n")
        events = await run(client, project, [connect])
        assert results(events)[0]["is_error"] and accepted == [1] and sandbox_of(events)["network"] is False
        user_config("")
        (project / ".roost" / "config.toml").write_text("[sandbox]\nnetwork = true\nmode = \"off\"\n")
        events = await run(client, project, [connect])
        assert results(events)[0]["is_error"] and accepted == [1]
        sandbox = sandbox_of(events)
        assert (sandbox["mode"], sandbox["network"]) == ("workspace", False)
        config = project / ".roost" / "config.toml"
        assert sandbox["ignored"] == [f"mode off ({config})", f"network = true ({config})"]
        nursery.cancel_scope.cancel()


async def _count(accepted: list[int], stream: trio.SocketStream) -> None:
    accepted.append(1)
    await stream.aclose()


async def test_read_only_mode_writes_nothing_and_off_mode_anything(client: TrioClient, tmp_path: Path, project: Path) -> None:
    events = await run(client, project, [bash("cat a.txt; touch made")], sandbox="read-only")
    (result,) = results(events)
    assert result["result"].startswith("a.txt\ntouch: cannot touch 'made': Read-only file system")
    assert "the session folder is read-only" in result["result"] and not (project / "made").exists()
    assert sandbox_of(events)["mode"] == "read-only"
    events = await run(client, project, [bash(f"touch made ../outside && ! {INSIDE}")], sandbox="off")
    assert not results(events)[0]["is_error"] and (tmp_path / "outside").exists()
    assert sandbox_of(events)["mode"] == "off"


async def test_agents_choose_a_sandbox_and_a_projects_agent_only_narrows(client: TrioClient, project: Path) -> None:
    for folder, name, mode in (
        (Path(os.environ["XDG_CONFIG_HOME"]) / "roost" / "agents", "mine", "off"),
        (project / ".roost" / "agents", "theirs", "off"),
        (project / ".roost" / "agents", "careful", "read-only"),
    ):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.md").write_text(f"---\nname: {name}\nsandbox: {mode}\n---\nWork.\n")
    modes = {}
    for agent in ("mine", "theirs", "careful"):
        modes[agent] = sandbox_of(await run(client, project, [bash("true")], agent=agent))["mode"]
    assert modes == {"mine": "off", "theirs": "workspace", "careful": "read-only"}


async def test_the_exec_check_runs_in_the_sandbox(client: TrioClient, project: Path) -> None:
    (project / "check.sh").write_text(f"{INSIDE}\n")
    model = write_script(project, [text("nothing to do")])
    started = await client.call("dispatch", task="t", model=model, cwd=str(project), mode="exec", attach=True)
    events = await events_until(client, finished(started["run"]))
    assert events[-1]["reason"] == "check_passed"


async def test_abort_ends_every_process_of_the_sandbox(client: TrioClient, project: Path) -> None:
    marker = f"3{secrets.randbelow(10**6)}.5"
    model = write_script(project, [bash(f"sleep {marker} & setsid sleep {marker} & wait")])
    started = await client.call("dispatch", yes=True, task="t", model=model, cwd=str(project), attach=True)
    with trio.fail_after(5):
        while len(with_marker(marker)) < 3:
            await trio.sleep(0.01)
    await client.call("abort", session=started["session"])
    await events_until(client, finished(started["run"]))
    with trio.fail_after(2):
        while with_marker(marker):
            await trio.sleep(0.01)


async def test_auto_allow_runs_bash_unasked_only_in_a_working_sandbox(client: TrioClient, project: Path) -> None:
    user_config("[sandbox]\nauto_allow = true\n")
    events = await run(client, project, [bash("touch made")], yes=False)
    assert not any(e["type"] == "permission.requested" for e in events)
    assert (project / "made").exists() and sandbox_of(events)["auto_allow"] is True
    assert next(e for e in events if e["type"] == "run.started")["permissions"]["sandboxed"] is True
    # Without the sandbox, bash asks as ever.
    model = write_script(project, [bash("touch again")], [text("done")], name="off.json")
    started = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True, sandbox="off")
    events = await events_until(client, lambda e: e["type"] == "permission.requested")
    assert "sandboxed" not in next(e for e in events if e["type"] == "run.started")["permissions"]
    await client.call("abort", session=started["session"])


# -- where bwrap is missing ----------------------------------------------------------------


@asynccontextmanager
async def serving(nursery: trio.Nursery, daemon: Daemon) -> AsyncIterator[TrioClient]:
    """A client of ``daemon``, serving in ``nursery`` until the block ends."""
    done = trio.Event()

    async def serve(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            await daemon.serve(task_status=task_status)
        finally:
            done.set()

    await nursery.start(serve)
    try:
        async with open_client(daemon.socket_path) as client:
            yield client
    finally:
        daemon.stopping.set()
        with trio.fail_after(10):
            await done.wait()


@pytest.fixture
async def unsandboxed(nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[TrioClient]:
    """A client of a daemon whose bwrap does not exist."""
    daemon = Daemon(Path(os.environ["ROOST_SOCKET"]), tmp_path / "roost.db", bwrap="/nonexistent/bwrap")
    async with serving(nursery, daemon) as client:
        yield client


async def test_without_bwrap_a_run_that_needs_the_sandbox_ends_with_an_error_saying_why(
    unsandboxed: TrioClient, tmp_path: Path, project: Path
) -> None:
    client = unsandboxed
    status = (await client.call("status"))["sandbox"]
    assert (status["available"], status["backend"]) == (False, "bubblewrap")
    assert status["reason"] == "/nonexistent/bwrap not found (install the bubblewrap package)"
    way_out = 'dispatch with --sandbox off, or set [sandbox] mode = "off" in config.toml'
    for mode in ("workspace", "read-only"):
        events = await run(client, project, [bash("touch ../outside")], sandbox=mode)
        sandbox = sandbox_of(events)
        assert (sandbox["mode"], sandbox["available"]) == (mode, False) and "not found" in sandbox["reason"]
        (result,) = results(events)
        assert result["is_error"] and "the sandbox cannot start: /nonexistent/bwrap not found" in result["result"]
        ended = events[-1]
        assert ended["reason"] == "error" and ended["error"].startswith(
            "the sandbox cannot start: /nonexistent/bwrap not found (install the bubblewrap package). "
        )
        assert way_out in ended["error"]
        assert not (tmp_path / "outside").exists()
    # A run with no command needs no sandbox; mode off is the user's choice, said.
    (ended,) = [e for e in await run(client, project) if e["type"] == "run.finished"]
    assert ended["reason"] == "done"
    events = await run(client, project, [bash("touch ../outside")], sandbox="off")
    assert not results(events)[0]["is_error"] and (tmp_path / "outside").exists()
