"""Bounded resources, through a real daemon: tool work never waits on a FIFO and never takes
the threads the store commits with."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import trio

from roost.daemon._server import Daemon
from roost.protocol.trio_client import TrioClient, open_client

from .conftest import events_until, finished, text, write_script


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
