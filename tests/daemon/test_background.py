"""Background commands through a real daemon and a scripted model: ``bash`` with
``run_in_background`` returns at once with an id, ``bash_output`` reads what is new (all of
it, or the lines a filter matches), ``kill_shell`` ends the command's group, and a run that
ends (finished or aborted) leaves none of its background processes running, sandboxed or
not. The daemon's ``status`` counts the ones running."""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from roost.daemon.tools import Shells, ToolContext, ToolRegistry
from roost.daemon.tools._shells import MAX_RUNNING, SEGMENT
from roost.protocol.trio_client import TrioClient
from tests._procs import alive, with_marker

from .conftest import bash, events_until, finished, text, write_script
from .test_sandbox import results, run

#: The sandbox modes a test runs in: unsandboxed always, in bwrap where it is installed.
MODES = ["off", pytest.param("workspace", marks=pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bwrap"))]


def call(name: str, **input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": input}


def background(command: str) -> dict[str, Any]:
    return bash(command, run_in_background=True)


async def gone(marker: str, timeout: float = 5) -> None:
    with trio.fail_after(timeout):
        while with_marker(marker):
            await trio.sleep(0.02)


@pytest.mark.parametrize("mode", MODES)
async def test_a_background_command_is_read_in_parts_then_killed(client: TrioClient, project: Path, mode: str) -> None:
    marker = f"7{secrets.randbelow(10**6)}.5"
    steps = [
        [background("for i in 1 2 3; do echo $i; sleep 0.2; done; echo more; while [ ! -e go ]; do sleep 0.01; done; echo last")],
        [bash("sleep 1.2")],
        [call("bash_output", id="bg1")],
        [call("bash_output", id="bg1")],
        [bash("touch go; sleep 0.5")],
        [call("bash_output", id="bg1")],
        [background(f"echo started; sleep {marker}")],
        [bash("sleep 0.5")],
        [call("kill_shell", id="bg2")],
        [call("bash_output", id="bg2")],
        [call("kill_shell", id="bg2")],
        [call("bash_output", id="nope")],
    ]
    events = await run(client, project, *steps, sandbox=mode)
    started, _, first, second, _, third, other, _, killed, after, again, unknown = results(events)
    assert not started["is_error"] and started["result"].startswith("started bg1 in the background")
    assert started["meta"]["shell"] == "bg1"
    assert first["result"] == "1\n2\n3\nmore\n[bg1 is still running]"
    assert first["meta"]["running"] is True and first["meta"]["bytes"] == 11
    # Nothing new since the last read.
    assert second["result"] == "(no new output)\n[bg1 is still running]"
    assert third["result"] == "last\n[bg1 exited with status 0]" and third["meta"]["exit_status"] == 0
    assert other["result"].startswith("started bg2")
    assert killed["result"] == "killed bg2" and not killed["is_error"]
    assert after["result"] == "started\n[bg2 was killed]" and after["meta"]["running"] is False
    assert again["result"] == "bg2 was killed already"
    assert unknown["is_error"] and unknown["result"] == "no background command 'nope' (this run's: bg1, bg2)"
    await gone(marker, timeout=1)


async def test_a_filter_shows_the_lines_it_matches_and_consumes_the_rest(client: TrioClient, project: Path) -> None:
    steps = [
        [background("printf 'ok 1\\nfail 2\\nok 3\\nfail 4'")],
        [bash("sleep 0.5")],
        [call("bash_output", id="bg1", filter="^fail")],
        [call("bash_output", id="bg1")],
        [call("bash_output", id="bg1", filter="(a+)+\\1")],
    ]
    _, _, matched, rest, bad = results(await run(client, project, *steps, sandbox="off"))
    assert matched["result"] == "fail 2\nfail 4\n[bg1 exited with status 0]"
    assert rest["result"] == "(no new output)\n[bg1 exited with status 0]"
    # A pattern that would backtrack is refused, never run.
    assert bad["is_error"] and bad["result"].startswith("the filter cannot be used")


@pytest.mark.parametrize("mode", MODES)
async def test_a_finished_run_leaves_no_background_process(client: TrioClient, project: Path, mode: str) -> None:
    marker = f"8{secrets.randbelow(10**6)}.5"
    pidfile = project / "bg.pid"
    command = f"sleep {marker} & echo $! > {pidfile}; sleep {marker}"
    events = await run(client, project, [background(command)], [bash(f"while [ ! -s {pidfile} ]; do sleep 0.01; done")], sandbox=mode)
    assert events[-1]["reason"] == "done"
    assert not any(r["is_error"] for r in results(events))
    await gone(marker)


async def test_an_aborted_run_leaves_no_background_process_and_status_counts_them(
    client: TrioClient, project: Path
) -> None:
    marker = f"9{secrets.randbelow(10**6)}.5"
    pidfile = project / "bg.pid"
    steps = [[background(f"sleep {marker} & echo $! > {pidfile}; wait")], [bash("sleep 30")], [text("never")]]
    model = write_script(project, *steps)
    started = await client.call("dispatch", yes=True, task="t", model=model, cwd=str(project), attach=True, sandbox="off")
    with trio.fail_after(10):
        while not pidfile.exists() or not pidfile.read_text().strip():
            await trio.sleep(0.01)
    child = int(pidfile.read_text())
    status = await client.call("status")
    assert status["background_commands"] == 1
    await client.call("abort", session=started["session"])
    events = await events_until(client, finished(started["run"]))
    assert events[-1]["reason"] == "aborted"
    with trio.fail_after(5):
        while alive(child):
            await trio.sleep(0.01)
    await gone(marker)
    assert (await client.call("status"))["background_commands"] == 0


# -- the tools alone --------------------------------------------------------------------------


async def test_output_is_kept_bounded_in_unlinked_files_and_a_read_shows_the_newest(tmp_path: Path) -> None:
    registry = ToolRegistry()
    folder = tmp_path / "shells"
    async with trio.open_nursery() as nursery:
        shells = Shells(nursery, folder)
        ctx = ToolContext(cwd=str(tmp_path), shells=shells, output_limit=1000)
        # 20 MB, more than the two files keep, then a last line.
        command = "head -c 20000000 /dev/zero | tr '\\0' x; echo; echo the end"
        started = await registry.call("bash", {"command": command, "run_in_background": True}, ctx)
        assert started.meta["shell"] == "bg1"
        shell = shells.get("bg1")
        assert shell is not None
        with trio.fail_after(20):
            await shell.exited.wait()
            while shell.output.total < 20_000_009:
                await trio.sleep(0.01)
        # No file of it to be found, and what it holds is bounded.
        assert list(folder.iterdir()) == []
        held = sum(os.fstat(fd).st_size for fd, _ in shell.output._segments)
        assert SEGMENT <= held <= 2 * SEGMENT + 65536
        read = await registry.call("bash_output", {"id": "bg1"}, ctx)
        lost = 20_000_009 - held
        assert read.text.startswith(f"[... {lost} bytes written since the last read were dropped: at most the newest 8 MiB are kept]\n")
        assert read.text.endswith("x\nthe end\n[bg1 exited with status 0]")
        assert read.meta["bytes"] == 20_000_009
        assert f"\n[... {20_000_009 - lost - 1000} earlier bytes not shown]\n" in read.text
        shown = read.text.split("\n", 2)[2].rsplit("\n", 1)[0]
        assert len(shown) == 1000 - 1  # the limit, less the last newline
        nursery.cancel_scope.cancel()
    shells.close()


async def test_background_commands_are_refused_past_the_limit_and_end_when_their_nursery_does(tmp_path: Path) -> None:
    registry = ToolRegistry()
    marker = f"6{secrets.randbelow(10**6)}.5"
    async with trio.open_nursery() as nursery:
        shells = Shells(nursery, tmp_path / "shells")
        ctx = ToolContext(cwd=str(tmp_path), shells=shells)
        for _ in range(MAX_RUNNING):
            assert not (await registry.call("bash", {"command": f"sleep {marker}", "run_in_background": True}, ctx)).is_error
        refused = await registry.call("bash", {"command": "true", "run_in_background": True}, ctx)
        assert refused.is_error and refused.text.startswith(f"{MAX_RUNNING} background commands are running already")
        assert shells.running() == MAX_RUNNING
        with trio.fail_after(5):
            while len(with_marker(marker)) < MAX_RUNNING:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    shells.close()
    await gone(marker, timeout=2)
    assert shells.running() == 0
