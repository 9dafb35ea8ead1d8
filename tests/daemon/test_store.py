"""The event store on a real SQLite file: numbering, durability, migrations, reads."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import trio

from roost.daemon._store import MIGRATIONS, EventStore
from roost.loop import Event


async def _with_store(path: Path, body, **kwargs) -> None:
    store = EventStore.open(path, **kwargs)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(store.run_writer)
            await body(store)
            store.stop_writer()
    finally:
        store.close()


async def test_events_are_numbered_per_session_and_on_disk_when_append_returns(tmp_path: Path) -> None:
    db = tmp_path / "roost.db"

    async def body(store: EventStore) -> None:
        await store.create_session("a", "/p", 1.0)
        await store.create_session("b", "/q", 2.0)
        async with trio.open_nursery() as nursery:
            for session in ("a", "b") * 50:
                nursery.start_soon(store.append, [Event("message.user", session, "r", 3.0, {"text": "x"})])
        numbered = await store.append([Event("run.finished", "a", "r", 4.0, {"reason": "done"})])
        assert numbered[0].seq == 51
        # Committed: another connection sees it at once.
        other = sqlite3.connect(db)
        try:
            rows = other.execute("SELECT session, max(seq), count(*) FROM events GROUP BY session").fetchall()
        finally:
            other.close()
        assert sorted(rows) == [("a", 51, 51), ("b", 50, 50)]
        assert [e.seq for e in await store.events("a", since=49)] == [50, 51]
        listed = await store.sessions()
        assert [(s.id, s.events, s.last_status) for s in listed] == [("a", 51, "done"), ("b", 50, None)]

    await _with_store(db, body)

    async def reopened(store: EventStore) -> None:
        assert store.last_seq("a") == 51
        assert (await store.append([Event("message.user", "a", "r", 5.0, {"text": "y"})]))[0].seq == 52
        assert await store.open_runs() == []

    await _with_store(db, reopened)
    other = sqlite3.connect(db)
    try:
        assert [n for (n,) in other.execute("SELECT name FROM _migrations")] == [n for n, _ in MIGRATIONS]
        assert other.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        other.close()


async def test_open_runs_and_request_ids(tmp_path: Path) -> None:
    async def body(store: EventStore) -> None:
        await store.create_session("s", "/p", 1.0)
        await store.append([Event("run.started", "s", "r1", 2.0, {"model": "m", "request_id": "k"})])
        assert await store.open_runs() == ["s"]
        assert await store.request_ids() == {"k": ("s", "r1")}
        await store.append([Event("run.finished", "s", "r1", 3.0, {"reason": "done"})])
        assert await store.open_runs() == []

    await _with_store(tmp_path / "db", body)


@pytest.mark.parametrize(("sync", "level"), [("normal", 1), ("full", 2)])
async def test_sync_setting(tmp_path: Path, sync: str, level: int) -> None:
    store = EventStore.open(tmp_path / "db", sync=sync)
    try:
        assert store._writer.execute("PRAGMA synchronous").fetchone() == (level,)
    finally:
        store.close()
    with pytest.raises(ValueError):
        EventStore.open(tmp_path / "db2", sync="fast")


async def test_live_events_are_never_stored(tmp_path: Path) -> None:
    async def body(store: EventStore) -> None:
        await store.create_session("s", "/p", 1.0)
        with pytest.raises(ValueError):
            await store.append([Event("text.delta", "s", "r", 1.0, {"text": "x"})])

    await _with_store(tmp_path / "db", body)
