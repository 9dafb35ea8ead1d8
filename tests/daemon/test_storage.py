"""Storage that scales, on a real daemon and its real SQLite file: large texts stored once by
hash, the history read back whole (attach, events, the model's next call after a restart)."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
import zlib
from pathlib import Path
from typing import Any

import msgpack
import pytest
import trio

from roost.daemon.runs import _sessions
from roost.daemon.storage._blobs import BLOB_MIN
from roost.loop import SessionState, fold
from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import open_client
from tests.fakes.anthropic_server import serve_anthropic

from .conftest import bash, events_until, finished, serving, stored, text, write_script


def _rows(db: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    check = sqlite3.connect(db)
    try:
        return check.execute(sql, args).fetchall()
    finally:
        check.close()


def _reply(*blocks: dict[str, Any]) -> dict[str, Any]:
    return {"content": list(blocks), "stop_reason": "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"}


def _cat(call_id: str, command: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "bash", "input": {"command": command}}


async def test_an_output_seen_twice_is_stored_once_and_read_back_whole(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "roost.db"
    # Text that does not compress much: the bytes stored are about the output's own.
    output = "".join(f"{i:05d} {os.urandom(24).hex()}\n" for i in range(400))
    assert len(output) > 8 * BLOB_MIN
    (project / "big.txt").write_text(output)
    script = [
        _reply(_cat("toolu_1", "cat big.txt")),
        _reply(_cat("toolu_2", "cat ./big.txt")),
        _reply({"type": "text", "text": "read it twice"}),
        _reply({"type": "text", "text": "still here"}),
    ]
    with serve_anthropic(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        async with serving(db) as d, open_client(d.socket_path) as c:
            run = await c.call(
                "dispatch", yes=True, task="read big.txt twice", model="anthropic/claude-test", cwd=str(project), attach=True
            )
            live = stored(await events_until(c, finished(run["run"])))
        session = run["session"]
        assert [e["result"] for e in live if e["type"] == "tool.finished"] == [output, output]

        # One row holds the output, once, by its SHA-256; both events refer to it.
        digest = hashlib.sha256(output.encode()).digest()
        [(size, stored_bytes)] = _rows(db, "SELECT size, length(data) FROM blobs WHERE hash = ?", digest)
        assert size == len(output.encode()) and len(output) // 2 < stored_bytes < len(output)
        finished_seqs = [e["seq"] for e in live if e["type"] == "tool.finished"]
        refs = _rows(db, "SELECT seq FROM blob_refs WHERE hash = ? ORDER BY seq", digest)
        assert [seq for (seq,) in refs] == finished_seqs
        # The events' own rows are small: the output is not in them.
        bodies = _rows(db, "SELECT max(length(body)) FROM events WHERE session = ?", session)
        assert bodies[0][0] < BLOB_MIN + 1024
        (total,) = _rows(db, "SELECT sum(length(data)) FROM blobs")[0]
        assert total < len(output) * 1.2

        # A new daemon: attach and events give the whole output; the model's next call
        # gets the history rebuilt from the store, outputs whole.
        async with serving(db) as d, open_client(d.socket_path) as c:
            await c.call("attach", session=session)
            replayed = await events_until(c, lambda e: e.get("seq") == live[-1]["seq"])
            assert replayed == live
            assert (await c.call("events", session=session))["events"] == live
            again = await c.call("dispatch", yes=True, task="and now?", session=session, model="anthropic/claude-test", attach=True)
            await events_until(c, finished(again["run"]))
        history = server.requests[-1].body["messages"]
    results = [b["content"] for m in history for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert results == [output, output]
    assert [n for (n,) in _rows(db, "SELECT count(*) FROM blobs")] == [1]


async def test_a_long_session_loads_from_its_snapshot_and_the_events_after_it(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sessions, "SNAPSHOT_AFTER", 10)
    db = tmp_path / "roost.db"
    steps = [[bash(f"echo {i}")] for i in range(4)]
    model = write_script(project, *steps, [text("first done")], [text("second done")], [text("third done")])
    async with serving(db) as d, open_client(d.socket_path) as c:
        run = await c.call("dispatch", yes=True, task="go", model=model, cwd=str(project), attach=True)
        first = stored(await events_until(c, finished(run["run"])))
        session = run["session"]
        # Written in the background once the run ended (more than 10 events since none).
        with trio.fail_after(5):
            while not _rows(db, "SELECT seq FROM snapshots"):
                await trio.sleep(0.01)
        assert _rows(db, "SELECT session, seq, format FROM snapshots") == [(session, first[-1]["seq"], _sessions.SNAPSHOT_KEY)]
        # A short run after it: not worth a new snapshot yet.
        again = await c.call("dispatch", yes=True, task="more", session=session, model=model, attach=True)
        second = stored(await events_until(c, finished(again["run"])))
        assert second[-1]["text"] == "second done"

    async def loaded() -> SessionState:
        async with serving(db) as d:
            state = (await d.api.conductor.sessions.get(session)).state
            # Folded from the snapshot and the events after it: the state the whole log gives.
            assert state == fold(await d.api.conductor.store.events(session), SessionState(session))
            async with open_client(d.socket_path) as c:
                third = await c.call("dispatch", yes=True, task="once more", session=session, model=model, attach=True)
                events = await events_until(c, finished(third["run"]))
            # The model's history was whole: the scripted model answers by its length.
            assert events[-1]["text"] == "third done"
        return state

    state = await loaded()
    assert state.last_seq == second[-1]["seq"] and len(state.messages) == 12
    # A snapshot of another version or format is never read: the log is folded whole, and
    # a snapshot of this one written in its place.
    check = sqlite3.connect(db)
    with check:
        check.execute("UPDATE snapshots SET format = 'another', body = x'80'")
    check.close()
    async with serving(db) as d:
        state = (await d.api.conductor.sessions.get(session)).state
        assert len(state.messages) == 14 and state == fold(await d.api.conductor.store.events(session), SessionState(session))
        with trio.fail_after(5):
            while _rows(db, "SELECT format FROM snapshots") != [(_sessions.SNAPSHOT_KEY,)]:
                await trio.sleep(0.01)
    # And it is what loading starts from: a mark put in it by hand is in the loaded state.
    [(body,)] = _rows(db, "SELECT body FROM snapshots")
    state = msgpack.unpackb(zlib.decompress(body), raw=False)
    marked = zlib.compress(msgpack.packb({**state, "summary": "from the snapshot"}, use_bin_type=True))
    check = sqlite3.connect(db)
    with check:
        check.execute("UPDATE snapshots SET body = ?", (marked,))
    check.close()
    async with serving(db) as d:
        assert (await d.api.conductor.sessions.get(session)).state.summary == "from the snapshot"


DAY = 86400.0


def _age(db: Path, session: str, days: float) -> None:
    """Make ``session``'s whole history ``days`` older, in the SQLite file (daemon stopped)."""
    check = sqlite3.connect(db)
    with check:
        check.execute("UPDATE events SET ts = ts - ? WHERE session = ?", (days * DAY, session))
        check.execute("UPDATE sessions SET created = created - ? WHERE id = ?", (days * DAY, session))
    check.close()


async def test_prune_deletes_old_idle_sessions_only_and_gc_then_frees_what_they_alone_held(
    tmp_path: Path, project: Path
) -> None:
    db = tmp_path / "roost.db"
    shared = "".join(f"{i} {os.urandom(20).hex()}\n" for i in range(300))
    own = "".join(f"{i} {os.urandom(20).hex()}\n" for i in range(300))
    (project / "shared.txt").write_text(shared)
    (project / "own.txt").write_text(own)
    reads_shared = write_script(project, [bash("cat shared.txt")], [text("read")], name="a.json")
    reads_both = write_script(project, [bash("cat shared.txt")], [bash("cat own.txt")], [text("read")], name="b.json")
    waits = write_script(project, [bash("cat own.txt")], [text("never")], name="c.json")
    async with serving(db) as d, open_client(d.socket_path) as c:
        ids = {}
        for name, model in (("a", reads_shared), ("b", reads_both)):
            run = await c.call("dispatch", yes=True, task=name, model=model, cwd=str(project), attach=True)
            await events_until(c, finished(run["run"]))
            ids[name] = run["session"]
        # Agent mode: its command waits for an approval, so its run stays in flight.
        run = await c.call("dispatch", task="c", model=waits, cwd=str(project), attach=True)
        await events_until(c, lambda e: e.get("type") == "permission.requested")
        ids["c"] = run["session"]
    a, b, c_ = ids["a"], ids["b"], ids["c"]
    _age(db, a, 40)
    _age(db, c_, 40)
    _age(db, b, 10)
    blob_bytes = dict(_rows(db, "SELECT hash, length(data) FROM blobs"))
    assert len(blob_bytes) == 2  # each output once, whoever read it

    async with serving(db) as d, open_client(d.socket_path) as c:
        listed = await c.call("sessions.prune", older_than=30 * DAY, dry_run=True)
        assert [r["id"] for r in listed["sessions"]] == [a] and [r["id"] for r in listed["kept"]] == [c_]
        assert listed["sessions"][0]["last_active"] < time.time() - 39 * DAY
        assert len(_rows(db, "SELECT id FROM sessions")) == 3  # a dry run deletes nothing
        assert (await c.call("gc"))["blobs"] == 0

        pruned = await c.call("sessions.prune", older_than=30 * DAY)
        assert [r["id"] for r in pruned["sessions"]] == [a] and [r["id"] for r in pruned["kept"]] == [c_]
        assert _rows(db, "SELECT count(*) FROM events WHERE session = ?", a) == [(0,)]
        assert _rows(db, "SELECT count(*) FROM blob_refs WHERE session = ?", a) == [(0,)]
        assert {r["id"] for r in (await c.call("sessions.list"))["sessions"]} == {b, c_}
        with pytest.raises(RpcError) as gone:
            await c.call("attach", session=a)
        assert gone.value.code == ErrorCode.SESSION_NOT_FOUND
        # What it read, b read too: nothing is freed yet.
        assert (await c.call("gc"))["blobs"] == 0 and len(_rows(db, "SELECT hash FROM blobs")) == 2

        # Younger than the limit: kept; older: deleted, and its outputs freed.
        assert (await c.call("sessions.prune", older_than=30 * DAY))["sessions"] == []
        assert [r["id"] for r in (await c.call("sessions.prune", older_than=5 * DAY))["sessions"]] == [b]
        freed = await c.call("gc")
        assert freed["blobs"] == 2 and freed["bytes"] == sum(blob_bytes.values())
        assert freed["free_bytes"] >= freed["bytes"] and freed["database"] == str(db)
        assert _rows(db, "SELECT count(*) FROM blobs") == [(0,)]
        # The session with a run in flight is still there, still waiting.
        [pending] = (await c.call("pending"))["pending"]
        assert pending["session"] == c_
        assert (await c.call("gc"))["blobs"] == 0


async def test_forks_read_their_parents_outputs_whole_and_prune_keeps_a_parent_for_its_forks(
    tmp_path: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_sessions, "SNAPSHOT_AFTER", 5)
    db = tmp_path / "roost.db"
    output = "".join(f"{i} {os.urandom(20).hex()}\n" for i in range(300))
    (project / "big.txt").write_text(output)
    model = write_script(project, [bash("cat big.txt")], [text("read")], [text("forked on")], name="a.json")
    async with serving(db) as d, open_client(d.socket_path) as c:
        run = await c.call("dispatch", yes=True, task="read", model=model, cwd=str(project), attach=True)
        parent_events = stored(await events_until(c, finished(run["run"])))
        parent = run["session"]
        fork = (await c.call("sessions.fork", session=parent))["session"]
        # The fork's history: the parent's events (the output whole), under the fork's id.
        await c.call("attach", session=fork)
        replayed = await events_until(c, lambda e: e.get("seq") == parent_events[-1]["seq"])
        assert [{**e, "session": parent} for e in replayed] == parent_events
        assert {e["session"] for e in replayed} == {fork}
        assert [e["result"] for e in (await c.call("events", session=fork))["events"] if e["type"] == "tool.finished"] == [output]
        again = await c.call("dispatch", yes=True, task="go on", session=fork, model=model, attach=True)
        assert stored(await events_until(c, finished(again["run"])))[-1]["text"] == "forked on"
    assert len(_rows(db, "SELECT seq FROM snapshots WHERE session = ?", fork)) == 1

    async with serving(db) as d, open_client(d.socket_path) as c:
        # Loaded from its snapshot and its own events after it: as the whole history folds.
        state = (await d.api.conductor.sessions.get(fork)).state
        assert state == fold(await d.api.conductor.store.events(fork), SessionState(fork))
        assert [b["content"] for m in state.messages for b in m["content"] if b.get("type") == "tool_result"] == [output]
    _age(db, parent, 40)
    async with serving(db) as d, open_client(d.socket_path) as c:
        # The parent is old, its fork is not: the parent stays, for the fork's history.
        pruned = await c.call("sessions.prune", older_than=30 * DAY)
        assert pruned["sessions"] == [] and [(r["id"], r["why"]) for r in pruned["kept"]] == [(parent, "it has forks that stay")]
    _age(db, fork, 40)
    async with serving(db) as d, open_client(d.socket_path) as c:
        # Both old: the fork goes first, then the parent, and gc frees the output.
        pruned = await c.call("sessions.prune", older_than=30 * DAY)
        assert [r["id"] for r in pruned["sessions"]] == [fork, parent] and pruned["kept"] == []
        assert (await c.call("gc"))["blobs"] == 1
    assert _rows(db, "SELECT count(*) FROM sessions") == [(0,)]
