"""Bounded resources, through a real daemon: tool work never waits on a FIFO and never takes
the threads the store commits with; a full disk (a small tmpfs) ends the run in flight with a
clear error while the daemon serves on, and runs work again once there is room."""

from __future__ import annotations

import logging
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio

from roost.daemon.__main__ import _PrivateLog
from roost.daemon.rpc._server import Daemon
from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient, open_client
from tests._disk import fill

from .conftest import bash, events_until, finished, serving, stored, text, write_script


def _read(path: str) -> dict[str, Any]:
    return {"type": "tool_use", "name": "read", "input": {"path": path}}


async def _run(client: TrioClient, project: Path, model: str) -> list[dict[str, Any]]:
    run = await client.call("dispatch", yes=True, task="t", model=model, cwd=str(project), attach=True)
    return await events_until(client, finished(run["run"]), timeout=30)


async def test_forty_fifo_reads_end_at_once_and_other_sessions_go_on(daemon: Daemon, project: Path) -> None:
    for n in range(40):
        os.mkfifo(project / f"pipe{n}")
    results: list[dict[str, Any]] = []

    async def reader(batch: int) -> None:
        model = write_script(project, [_read(f"pipe{n}") for n in range(batch * 8, batch * 8 + 8)], [text("ok")], name=f"s{batch}.json")
        async with open_client(daemon.socket_path) as client:
            results.extend(e for e in await _run(client, project, model) if e["type"] == "tool.finished")

    async def writer() -> None:
        model = write_script(project, [{"type": "tool_use", "name": "write", "input": {"path": "w.txt", "content": "w"}}], [text("ok")], name="w.json")
        async with open_client(daemon.socket_path) as client:
            events = await _run(client, project, model)
        assert events[-1]["reason"] == "done"

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            for batch in range(5):
                nursery.start_soon(reader, batch)
            nursery.start_soon(writer)
    assert len(results) == 40
    assert all(r["is_error"] and "is not a regular file (a FIFO)" in r["result"] for r in results)
    assert (project / "w.txt").read_text() == "w"


async def test_runs_go_on_while_every_tool_thread_is_taken(daemon: Daemon, client: TrioClient, project: Path) -> None:
    assert daemon.tools is not None
    threads = daemon.tools.threads
    holders = [object() for _ in range(int(threads.total_tokens))]
    for holder in holders:
        threads.acquire_on_behalf_of_nowait(holder)
    (project / "f.txt").write_text("x\n")
    waiting = await client.call(
        "dispatch", yes=True, task="t", model=write_script(project, [_read("f.txt")], [text("read")], name="r.json"),
        cwd=str(project), attach=True,
    )
    await events_until(client, lambda e: e["type"] == "tool.started")
    try:
        # Tools wait for a thread; the store does not: another session's run is stored to its end.
        async with open_client(daemon.socket_path) as other:
            events = await _run(other, project, write_script(project, [text("hello")], name="t.json"))
        assert events[-1]["reason"] == "done"
    finally:
        for holder in holders:
            threads.release_on_behalf_of(holder)
    events = await events_until(client, finished(waiting["run"]))
    assert next(e for e in events if e["type"] == "tool.finished")["result"] == "1\tx"


async def test_a_full_disk_ends_the_run_in_flight_and_the_daemon_serves_on(small_disk: Path, project: Path) -> None:
    db = small_disk / "roost.db"
    # A reply far larger than the room left, even compressed (large texts are stored so).
    big = os.urandom(350 << 10).hex()
    async with serving(db) as daemon, open_client(daemon.socket_path) as client:
        await _run(client, project, write_script(project, [text("fine")], name="a.json"))
        filler = fill(small_disk, leave=100 << 10)
        model = write_script(project, [text(big)], name="big.json")
        run = await client.call("dispatch", yes=True, task="t", cwd=str(project), model=model, attach=True)
        session = run["session"]
        events = stored(await events_until(client, finished(run["run"])))
        end = events[-1]
        assert end["reason"] == "error" and end["error"] == (
            "the run's events could not be stored, so it was ended: the disk holding the database "
            f"{db} is full (database or disk is full); free some space there"
        )
        assert [e["type"] for e in events[-2:]] == ["error", "run.finished"]
        assert not any(e["type"] == "message.assistant" for e in events)
        # The daemon serves on: status, the list, a replay.
        assert (await client.call("status"))["runs"] == 0
        rows = {r["id"]: r for r in (await client.call("sessions.list"))["sessions"]}
        assert rows[session]["status"] == "error"
        async with open_client(daemon.socket_path) as other:
            attached = await other.call("attach", session=session)
            assert attached["last_seq"] == end["seq"]
        # A run that cannot even start is refused as such.
        with pytest.raises(RpcError) as refused:
            await client.call("dispatch", yes=True, task=big, session=session, model=model)
        assert refused.value.code == ErrorCode.STORE_FULL and refused.value.data == {"database": str(db)}
        # Room again: runs work.
        filler.unlink()
        again = await client.call("dispatch", yes=True, task="t", session=session, model=model, attach=True)
        events = await events_until(client, finished(again["run"]))
        assert events[-1]["reason"] == "done" and events[-1]["text"] == big
    _integrity_ok(db)


async def test_a_run_whose_end_cannot_be_stored_ends_in_memory_and_is_settled_with_room(
    small_disk: Path, project: Path
) -> None:
    db = small_disk / "roost.db"
    async with serving(db) as daemon, open_client(daemon.socket_path) as client:
        # Agent mode: the command waits for approval; the disk fills meanwhile.
        model = write_script(project, [bash("true")], [text("done")])
        run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
        asked = await events_until(client, lambda e: e["type"] == "permission.requested")
        session, call_id = run["session"], asked[-1]["call_id"]
        filler = fill(small_disk)
        with pytest.raises(RpcError) as refused:
            await client.call("permission.respond", session=session, call_id=call_id, decision="approve")
        assert refused.value.code == ErrorCode.STORE_FULL and str(db) in refused.value.message
        # Attached clients are told, live (nothing of it is stored).
        note = (await events_until(client, lambda e: e["type"] == "error"))[-1]
        assert "seq" not in note and note["stored"] is False and "could not be stored" in note["message"]
        assert (await client.call("status"))["runs"] == 0
        (row,) = (await client.call("sessions.list"))["sessions"]
        assert row["status"] == "error"
        async with open_client(daemon.socket_path) as other:
            # No half state: while the end cannot be stored, attaching says why.
            with pytest.raises(RpcError) as full:
                await other.call("attach", session=session)
            assert full.value.code == ErrorCode.STORE_FULL
            filler.unlink()
            await other.call("attach", session=session)
            replay = await events_until(other, finished(run["run"]))
        end = replay[-1]
        assert end["reason"] == "error" and "could not be stored, so it was ended" in end["error"]
        # The approval was never stored; the request is closed by the end, as any run's.
        assert [e["type"] for e in replay[-4:]] == ["error", "permission.resolved", "tool.finished", "run.finished"]
        assert replay[-3]["decision"] == "deny" and replay[-3]["client"] == "roost"
        again = await client.call("dispatch", yes=True, task="t", session=session, model=model, attach=True)
        assert (await events_until(client, finished(again["run"])))[-1]["reason"] == "done"
    _integrity_ok(db)


async def test_a_connection_made_before_the_database_opens_is_served_once_it_does(
    small_disk: Path, project: Path
) -> None:
    db = small_disk / "roost.db"
    filler = fill(small_disk)
    async with serving(db) as daemon, open_client(daemon.socket_path) as client:
        assert (await client.call("status"))["store"]["ok"] is False
        model = write_script(project, [text("served")])
        with pytest.raises(RpcError) as refused:
            await client.call("dispatch", yes=True, task="t", model=model, cwd=str(project))
        assert refused.value.code == ErrorCode.STORE_FULL
        filler.unlink()
        # The same connection, asked again and again while the daemon switches over: every
        # request is answered, none is cut off.
        with trio.fail_after(20):
            while not (await client.call("status"))["store"]["ok"]:
                await trio.sleep(0.01)
        run = await client.call("dispatch", yes=True, task="t", model=model, cwd=str(project), attach=True)
        assert (await events_until(client, finished(run["run"])))[-1]["text"] == "served"
    _integrity_ok(db)


def _integrity_ok(db: Path) -> None:
    check = sqlite3.connect(db)
    try:
        assert check.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        check.close()


def test_a_log_on_a_full_disk_says_so_once_and_goes_on(small_disk: Path, capsys: pytest.CaptureFixture[str]) -> None:
    handler = _PrivateLog(small_disk / "roostd.log")
    record = logging.LogRecord("roost", logging.INFO, __file__, 1, "x" * 20000, None, None)
    try:
        filler = fill(small_disk)
        for _ in range(3):
            handler.emit(record)
        err = capsys.readouterr().err
        assert err == (
            f"roost daemon: cannot write the log {small_disk / 'roostd.log'}: No space left on device; "
            "records may be lost until it works again\n"
        )
        filler.unlink()
        handler.emit(record)
        assert not handler.failing and capsys.readouterr().err == ""
    finally:
        handler.close()


async def test_a_dispatch_refused_for_a_full_disk_leaves_no_empty_session(small_disk: Path, project: Path) -> None:
    db = small_disk / "roost.db"
    big = os.urandom(350 << 10).hex()
    async with serving(db) as daemon, open_client(daemon.socket_path) as client:
        await _run(client, project, write_script(project, [text("fine")], name="a.json"))
        before = {r["id"] for r in (await client.call("sessions.list"))["sessions"]}
        filler = fill(small_disk, leave=100 << 10)
        model = write_script(project, [text("never")], name="b.json")
        with pytest.raises(RpcError) as refused:
            # A new session whose run cannot start: its task does not fit.
            await client.call("dispatch", yes=True, task=big, cwd=str(project), model=model)
        assert refused.value.code == ErrorCode.STORE_FULL
        filler.unlink()
        after = {r["id"] for r in (await client.call("sessions.list"))["sessions"]}
        assert after == before
    _integrity_ok(db)
