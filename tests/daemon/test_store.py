"""The event store on a real SQLite file: numbering, durability, migrations, reads, its own
threads, a full disk (a small tmpfs), a damaged file."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from roost.daemon.storage._schema import MIGRATIONS
from roost.daemon.storage._store import EventStore, StoreDamaged, StoreError, StoreFull, set_aside
from roost.daemon.storage._writer import Writer
from roost.loop import Event
from tests._disk import fill


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


async def test_the_store_commits_and_reads_on_threads_of_its_own(tmp_path: Path) -> None:
    default = trio.to_thread.current_default_thread_limiter()
    holders = [object() for _ in range(int(default.total_tokens))]

    async def body(store: EventStore) -> None:
        for holder in holders:
            default.acquire_on_behalf_of_nowait(holder)
        try:
            # Every one of trio's default worker threads is taken (tools stuck on a slow
            # file system, say): events are still stored and read.
            with trio.fail_after(5):
                await store.create_session("s", "/p", 1.0)
                await store.append([Event("message.user", "s", "r", 2.0, {"text": "x"})])
                assert [e.seq for e in await store.events("s")] == [1]
        finally:
            for holder in holders:
                default.release_on_behalf_of(holder)

    await _with_store(tmp_path / "db", body)


async def test_a_full_disk_fails_the_append_alone_and_stores_nothing(small_disk: Path) -> None:
    db = small_disk / "roost.db"
    big = {"text": os.urandom(1 << 20).hex()}  # 2 MB of text: more than the disk has left

    async def body(store: EventStore) -> None:
        await store.create_session("a", "/p", 1.0, [Event("message.user", "a", "r", 1.0, {"text": "one"})])
        await store.create_session("b", "/p", 1.0)
        filler = fill(small_disk, leave=200 << 10)
        outcomes: dict[str, Any] = {}

        async def append(session: str, data: dict[str, Any]) -> None:
            try:
                outcomes[session] = await store.append([Event("message.user", session, "r", 2.0, data)])
            except StoreFull as exc:
                outcomes[session] = exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(append, "a", big)
            nursery.start_soon(append, "b", {"text": "small"})
        assert isinstance(outcomes["a"], StoreFull)
        assert str(outcomes["a"]) == (
            f"the disk holding the database {db} is full (database or disk is full); free some space there"
        )
        # The small append, in the same batch or not, was stored; the big one took no seq.
        assert [e.seq for e in outcomes["b"]] == [1]
        assert store.last_seq("a") == 1
        with pytest.raises(StoreFull):
            await store.create_session("c", "/p", 3.0, [Event("message.user", "c", "r", 3.0, big)])
        assert not store.has_session("c")
        filler.unlink()
        # Room again: the same store goes on, with no gap.
        assert [e.seq for e in await store.append([Event("message.user", "a", "r", 4.0, big)])] == [2]

    await _with_store(db, body)
    check = sqlite3.connect(db)
    try:
        assert check.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert check.execute("SELECT session, seq FROM events ORDER BY session, seq").fetchall() == [
            ("a", 1), ("a", 2), ("b", 1),
        ]  # fmt: skip
        assert check.execute("SELECT id FROM sessions ORDER BY id").fetchall() == [("a",), ("b",)]
    finally:
        check.close()


def test_a_damaged_file_is_refused_unchanged_and_set_aside_whole(tmp_path: Path) -> None:
    db = tmp_path / "roost.db"
    garbage = b"this is not a database, " * 100
    db.write_bytes(garbage)
    (tmp_path / "roost.db-wal").write_bytes(b"wal")
    with pytest.raises(StoreDamaged) as info:
        EventStore.open(db)
    assert str(info.value) == f"the database {db} is damaged (file is not a database)"
    assert db.read_bytes() == garbage
    aside = set_aside(db)
    assert aside.name.startswith("roost.db.corrupt-") and aside.read_bytes() == garbage
    assert Path(f"{aside}-wal").read_bytes() == b"wal"
    assert not db.exists() and not Path(f"{db}-wal").exists()
    # Never over an earlier one.
    db.write_bytes(b"again")
    second = set_aside(db)
    assert second != aside and second.read_bytes() == b"again" and aside.read_bytes() == garbage
    EventStore.open(db).close()


async def test_long_texts_are_stored_once_by_hash_and_put_back_on_reading(tmp_path: Path) -> None:
    db = tmp_path / "db"
    long = "a file's content, written twice\n" * 200
    short = "small" * 10

    async def body(store: EventStore) -> None:
        await store.create_session("a", "/p", 1.0)
        await store.create_session("b", "/p", 1.0)
        call = {"name": "write", "input": {"path": "f", "content": long}}
        await store.append([Event("tool.started", "a", "r", 2.0, {"call_id": "1", **call, "also": [long, short]})])
        await store.append([Event("message.user", "b", "r", 3.0, {"text": long})])
        [a] = await store.events("a")
        assert a.data["input"]["content"] == long and a.data["also"] == [long, short]
        [b] = await store.events("b")
        assert b.data["text"] == long

    await _with_store(db, body)
    check = sqlite3.connect(db)
    try:
        assert check.execute("SELECT count(*), sum(size) FROM blobs").fetchone() == (1, len(long))
        assert check.execute("SELECT session, seq FROM blob_refs ORDER BY session").fetchall() == [("a", 1), ("b", 1)]
        assert all(len(body) < 500 for (body,) in check.execute("SELECT body FROM events"))
    finally:
        check.close()


def _user(session: str, text: str, ts: float = 2.0) -> Event:
    return Event("message.user", session, "r", ts, {"text": text})


async def test_a_fork_shares_its_parents_history_up_to_its_seq(tmp_path: Path) -> None:
    db = tmp_path / "roost.db"

    async def body(store: EventStore) -> None:
        await store.create_session("p", "/p", 1.0, [Event("session.created", "p", None, 1.0, {"cwd": "/p"})])
        await store.append([_user("p", f"p{n}") for n in range(2, 6)])  # seqs 2..5
        # b shares p's first three events; its own start at 4.
        own = await store.create_session("b", "/p", 2.0, [_user("b", "b4")], parent="p", forked_at=3)
        assert [e.seq for e in own] == [4]
        assert [e.seq for e in await store.append([_user("b", "b5")])] == [5]
        # A fork of the fork, at b's own seq 4, and one of p's shared part, at 2.
        await store.create_session("c", "/p", 3.0, parent="b", forked_at=4)
        await store.create_session("d", "/p", 4.0, parent="b", forked_at=2)
        await store.append([_user("p", "p6"), _user("c", "c5"), _user("d", "d3")])

        def texts(events: list[Event]) -> list[str]:
            return [e.data.get("text", e.type) for e in events]

        assert texts(await store.events("p")) == ["session.created", "p2", "p3", "p4", "p5", "p6"]
        assert texts(await store.events("b")) == ["session.created", "p2", "p3", "b4", "b5"]
        assert texts(await store.events("c")) == ["session.created", "p2", "p3", "b4", "c5"]
        assert texts(await store.events("d")) == ["session.created", "p2", "d3"]
        events = await store.events("c")
        assert [e.seq for e in events] == [1, 2, 3, 4, 5]
        # Read as the fork's own: its id in every event.
        assert {e.session for e in events} == {"c"}
        assert texts(await store.events("c", since=2, limit=2)) == ["p3", "b4"]
        assert store.parent("c") == ("b", 4) and store.parent("p") is None
        rows = {row.id: row for row in await store.sessions()}
        assert [(rows[s].events, rows[s].parent, rows[s].forked_at) for s in "pbcd"] == [
            (6, None, None), (5, "p", 3), (5, "b", 4), (3, "b", 2),
        ]  # fmt: skip
        with pytest.raises(ValueError):
            await store.create_session("e", "/p", 5.0, parent="p", forked_at=7)

    await _with_store(db, body)

    async def reopened(store: EventStore) -> None:
        # A fork with no events of its own goes on after its fork point.
        await store.create_session("e", "/p", 5.0, parent="p", forked_at=6)
        assert store.last_seq("c") == 5 and store.last_seq("e") == 6
        assert [e.seq for e in await store.append([_user("e", "e7")])] == [7]
        assert [e.data.get("text") for e in await store.events("e", since=5)] == ["p6", "e7"]

    await _with_store(db, reopened)
    check = sqlite3.connect(db)
    try:
        check.execute("PRAGMA foreign_keys=ON")
        # Only the forks' own events are stored under their ids.
        assert check.execute("SELECT count(*) FROM events WHERE session = 'c'").fetchone() == (1,)
        # A parent cannot be deleted from under its forks; a leaf can.
        with pytest.raises(sqlite3.IntegrityError):
            check.execute("DELETE FROM sessions WHERE id = 'b'")
        check.execute("DELETE FROM sessions WHERE id = 'c'")
    finally:
        check.close()


async def test_a_database_from_before_forks_is_migrated(tmp_path: Path) -> None:
    db = tmp_path / "roost.db"
    old = sqlite3.connect(db, isolation_level=None)
    try:
        old.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied REAL)")
        MIGRATIONS[0][1](old)
        old.execute("INSERT INTO _migrations VALUES ('m001_initial', 0)")
        old.execute("INSERT INTO sessions VALUES ('s', '/p', 1.0)")
    finally:
        old.close()

    async def body(store: EventStore) -> None:
        [row] = await store.sessions()
        assert (row.id, row.parent, row.forked_at) == ("s", None, None)

    await _with_store(db, body)


async def test_commits_never_checkpoint_and_the_store_checkpoints_beside_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SQLite's own checkpoint runs inside the commit that fills the WAL (~10 ms with its
    # fsync, and every run in that batch waits): the store's connections never do it, a
    # checkpointer of its own copies the WAL into the file beside the writer.
    from roost.daemon.storage import _maintenance

    monkeypatch.setattr(_maintenance, "CHECKPOINT_ROWS", 50)
    db = tmp_path / "roost.db"

    async def body(store: EventStore) -> None:
        for connection in (store._writer, store._reader, store._checkpointer):
            assert connection.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
        await store.create_session("s", "/p", 1.0)
        empty = db.stat().st_size
        for i in range(400):
            await store.append([Event("message.user", "s", "r", 2.0, {"text": f"{i}: " + "x" * 2000})])
        # The events reached the database file itself, not only the WAL.
        with trio.fail_after(10):
            while db.stat().st_size < empty + 400 * 2000:
                await trio.sleep(0.01)
        assert [e.seq for e in await store.events("s", since=398)] == [399, 400]

    await _with_store(db, body)


async def test_media_is_stored_once_held_by_its_sessions_and_freed_with_them(tmp_path: Path) -> None:
    data = os.urandom(5000)

    async def body(store: EventStore) -> None:
        await store.create_session("a", "/p", 1.0)
        await store.create_session("b", "/p", 1.0)
        digest = await store.put_media("a", data)
        assert await store.put_media("a", data) == await store.put_media("b", data) == digest
        assert await store.media(digest) == data
        assert await store.media("not hex") is None and await store.media("00" * 32) is None
        # Nothing but the sessions refers to it: each keeps it while it exists.
        assert await store.delete_sessions(["a"], idle_since=10.0) == ["a"]
        assert await store.collect_garbage() == (0, 0)
        assert await store.media(digest) == data
        assert await store.delete_sessions(["b"], idle_since=10.0) == ["b"]
        assert (await store.collect_garbage())[0] == 1
        assert await store.media(digest) is None

    await _with_store(tmp_path / "roost.db", body)


@pytest.mark.parametrize("sync", ["normal", "full"])
async def test_every_append_commits_on_the_writers_thread_never_the_loops(tmp_path: Path, sync: str) -> None:
    # DESIGN.md: the state is written from one worker thread; the event loop never waits
    # on the disk or on SQLite's lock, however small the commit.
    db = tmp_path / "roost.db"
    loop = threading.get_ident()
    writers: list[bool] = []  # per event inserted: whether the loop's thread inserted it

    async def body(store: EventStore) -> None:
        await store.create_session("a", "/p", 1.0)
        # Which thread runs the writer's statements (SQLite calls its trace hook there).
        store._writer.set_trace_callback(
            lambda sql: writers.append(threading.get_ident() == loop) if sql.startswith("INSERT INTO events") else None
        )
        await store.append([Event("message.user", "a", "r", 2.0, {"text": "small"})])
        await store.append([Event("message.user", "a", "r", 3.0, {"text": "x" * 100_000})])
        await store.append([Event("message.user", "a", "r", 4.0, {"text": str(i)}) for i in range(65)])
        other = sqlite3.connect(db)
        try:
            assert other.execute("SELECT count(*) FROM events").fetchone() == (67,)
        finally:
            other.close()

    await _with_store(db, body, sync=sync)
    assert writers == [False] * 67


async def test_what_was_queued_is_stored_when_its_caller_and_the_writer_are_cancelled(tmp_path: Path) -> None:
    db = tmp_path / "roost.db"
    store = EventStore.open(db)
    stored: list[list[int]] = []
    try:
        async with trio.open_nursery() as outer:
            await outer.start(store.run_writer)
            await store.create_session("s", "/p", 1.0)

            async def append(i: int) -> None:
                stored.append([e.seq for e in await store.append([Event("message.user", "s", "r", 2.0, {"text": str(i)})])])

            async with trio.open_nursery() as runs:
                for i in range(20):
                    runs.start_soon(append, i)
                await trio.testing.wait_all_tasks_blocked()
                # Every append is queued and waiting: the runs and the writer are cancelled
                # (the daemon stopping on a failure), and each append still returns, stored.
                outer.cancel_scope.cancel()
    finally:
        store.close()
    assert sorted(seq for seqs in stored for seq in seqs) == list(range(1, 21))
    other = sqlite3.connect(db)
    try:
        assert other.execute("SELECT count(*) FROM events").fetchone() == (20,)
    finally:
        other.close()


async def test_a_bug_in_committing_fails_its_appends_and_the_writer_loudly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Writer, rows: list) -> None:
        raise RuntimeError("a bug in the writer")

    store = EventStore.open(tmp_path / "roost.db")
    failed: list[str] = []

    async def append(text: str) -> None:
        try:
            await store.append([Event("message.user", "s", "r", 2.0, {"text": text})])
        except RuntimeError as exc:
            failed.append(str(exc))

    try:
        with pytest.raises(BaseExceptionGroup) as caught:
            async with trio.open_nursery() as nursery:
                await nursery.start(store.run_writer)
                await store.create_session("s", "/p", 1.0)
                monkeypatch.setattr(Writer, "_commit", broken)
                with trio.fail_after(5):  # none is left waiting, and the writer's failure ends it all
                    async with trio.open_nursery() as runs:
                        for text in "abc":
                            runs.start_soon(append, text)
                    await trio.sleep_forever()
    finally:
        store.close()
    assert failed == ["a bug in the writer"] * 3
    assert caught.group_contains(RuntimeError, match="a bug in the writer")
    with pytest.raises(StoreError, match="is closing"):
        await store.append([Event("message.user", "s", "r", 2.0, {"text": "d"})])


async def test_reading_after_the_last_seq_finds_nothing_without_reading(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async def body(store: EventStore) -> None:
        await store.create_session("s", "/p", 1.0)
        await store.append([Event("message.user", "s", "r", 2.0, {"text": str(i)}) for i in range(3)])
        last = store.last_seq("s")
        assert [seq for seq, _ in await store.packed_events("s", last - 1)] == [last]
        assert [e.seq for e in await store.events("s", last - 2)] == [last - 1, last]
        reads: list[str] = []
        for name in ("events", "packed_events"):
            real = getattr(store._reads, name)
            monkeypatch.setattr(store._reads, name, lambda *a, real=real, name=name: reads.append(name) or real(*a))
        # A client that has seen everything, or a session there is not: nothing, and no read.
        assert await store.packed_events("s", last) == [] and await store.events("s", last) == []
        assert await store.packed_events("nope", 0) == []
        assert reads == []
        assert [seq for seq, _ in await store.packed_events("s", last - 1)] == [last] and reads == ["packed_events"]

    await _with_store(tmp_path / "roost.db", body)
