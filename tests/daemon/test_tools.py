"""Built-in tools run for real: bash in its process group, read, and the process ledger."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import trio

from roost.daemon.tools import ProcessLedger, ToolContext, ToolRegistry


async def test_bash_output_status_and_truncation(tmp_path: Path) -> None:
    tools = ToolRegistry()
    ok = await tools.call("bash", {"command": "echo out; echo err >&2"}, ToolContext(str(tmp_path)))
    assert (ok.text, ok.is_error, ok.meta["exit_status"]) == ("out\nerr\n", False, 0)
    big = await tools.call(
        "bash", {"command": "yes x | head -c 5000"}, ToolContext(str(tmp_path), output_limit=100)
    )
    assert big.text.startswith("x\nx\n") and "4900 more characters not shown" in big.text
    assert big.meta["bytes"] == 5000
    failed = await tools.call(
        "bash", {"command": "yes y | head -c 5000; exit 4"}, ToolContext(str(tmp_path), output_limit=100)
    )
    assert failed.is_error and failed.text.endswith("not shown]\n[exit status 4]")


async def test_bash_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child"
    ledger = ProcessLedger(tmp_path / "ledger")
    result = await ToolRegistry().call(
        "bash",
        {"command": f"sleep 30 & echo $! > {pidfile}; wait", "timeout": 0.3},
        ToolContext(str(tmp_path), ledger=ledger),
    )
    assert result.is_error and "timed out after 0.3 s" in result.text and result.meta["timed_out"]
    assert not _alive(int(pidfile.read_text()))
    assert list(ledger.folder.iterdir()) == []


async def test_processes_started_by_a_call_end_with_it(tmp_path: Path) -> None:
    pidfile = tmp_path / "child"
    result = await ToolRegistry().call(
        "bash", {"command": f"sleep 30 > /dev/null 2>&1 & echo $! > {pidfile}"}, ToolContext(str(tmp_path))
    )
    assert not result.is_error
    with trio.fail_after(2):
        while _alive(int(pidfile.read_text())):
            await trio.sleep(0.01)


def test_the_ledger_kills_leftover_groups_but_never_a_recycled_pid(tmp_path: Path) -> None:
    ledger = ProcessLedger(tmp_path / "ledger")
    leftover = subprocess.Popen(["sleep", "30"], start_new_session=True)
    stranger = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        ledger.add(leftover.pid)
        # A file naming a live pid with another start time: that pid was reused.
        (ledger.folder / str(stranger.pid)).write_text("1")
        (ledger.folder / "notes").write_text("ignored")
        assert ledger.end_leftovers() == [leftover.pid]
        assert leftover.wait(5) == -signal.SIGKILL
        assert stranger.poll() is None
        assert sorted(p.name for p in ledger.folder.iterdir()) == ["notes"]
    finally:
        for process in (leftover, stranger):
            if process.poll() is None:
                process.kill()
            process.wait()


async def test_read_resolves_paths_from_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "f.txt").write_text("one\ntwo\n")
    tools, ctx = ToolRegistry(), ToolContext(str(tmp_path))
    assert (await tools.call("read", {"path": "sub/f.txt"}, ctx)).text == "1\tone\n2\ttwo"
    assert "is a directory" in (await tools.call("read", {"path": "sub"}, ctx)).text
    bad = await tools.call("read", {"path": "sub/f.txt", "offset": 0}, ctx)
    assert bad.is_error and "offset" in bad.text


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False
