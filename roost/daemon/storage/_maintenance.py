"""Keeping the database in shape beside the runs: checkpoints, snapshots, deleting
sessions, and removing the texts nothing refers to any more.

Checkpoints (copying the WAL into the database file, with an fsync) are never a commit's:
SQLite's automatic one runs inside the commit that fills the WAL, and every run waiting on
that batch waited ~10 ms with it, so no connection of the store runs it (``_schema.py``).
The :class:`Checkpointer`, a third connection on a thread of its own, checkpoints beside
the writer (``PASSIVE``: it never blocks a commit) after every :data:`CHECKPOINT_ROWS` rows
committed.

The rest is work for the writer's thread (``Writer.work``: one writer, a transaction each):
:func:`write_snapshot`, :func:`delete_idle` and :func:`collect_garbage`. Large texts of
events are stored once, by content, in ``blobs`` and referenced from the events that hold
them (``blob_refs``); deleting sessions deletes their references, and a text nothing refers
to any more is removed by :func:`collect_garbage`.
"""

from __future__ import annotations

import sqlite3
import zlib
from typing import Any, Callable, Sequence

import trio

from ._blobs import pack_body
from ._schema import LAST_ACTIVE
from ._writer import store_blobs

#: Rows committed between two checkpoints (SQLite's own default is every ~1,000 WAL pages).
CHECKPOINT_ROWS = 2000


class Checkpointer:
    """Copies the WAL into the database file after every :data:`CHECKPOINT_ROWS` rows the
    writer commits, on a connection and a thread of its own.

    Resource handling:
        Run :meth:`run` in the writer's nursery; cancel it when the writer ends (a
        checkpoint under way is waited for). The connection is the store's, which closes it.
    """

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._due = trio.Event()
        self._uncheckpointed = 0

    def committed(self, rows: int) -> None:
        """Count ``rows`` committed; a checkpoint is due after every :data:`CHECKPOINT_ROWS`."""
        self._uncheckpointed += rows
        if self._uncheckpointed >= CHECKPOINT_ROWS:
            self._uncheckpointed = 0
            self._due.set()

    async def run(self) -> None:
        """Checkpoint whenever one is due, until cancelled."""
        # On a thread outside the store's limiter: a checkpoint may take a while (it fsyncs),
        # and neither a commit nor a read waits for it. One under way is waited for when the
        # writer ends (it is bounded by the WAL), never left running on a closing connection.
        limiter = trio.CapacityLimiter(1)
        while True:
            await self._due.wait()
            self._due = trio.Event()
            await trio.to_thread.run_sync(self._checkpoint, limiter=limiter)

    def _checkpoint(self) -> None:
        try:
            self._db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error:
            # The next one catches up; a WAL that is not copied yet loses nothing.
            pass


def write_snapshot(db: sqlite3.Connection, session: str, seq: int, format: str, state: Callable[[], Any]) -> None:
    """Keep ``state()`` as ``session``'s snapshot as of ``seq``, in place of its earlier one:
    msgpack, zlib-compressed, its long texts blobs (referenced with seq 0)."""
    body, blobs = pack_body(state())
    # A history is mostly text: compressed, it is a few bytes an event.
    body = zlib.compress(body, 1)
    db.execute("DELETE FROM blob_refs WHERE session = ? AND seq = 0", (session,))
    db.execute("INSERT OR REPLACE INTO snapshots VALUES (?, ?, ?, ?)", (session, seq, format, body))
    store_blobs(db, session, 0, blobs)


def delete_idle(db: sqlite3.Connection, sessions: Sequence[str], idle_since: float) -> list[str]:
    """Delete, in this order, those of ``sessions`` with no activity since ``idle_since``
    and no forks left (their events, references and snapshots go with them: ``ON DELETE
    CASCADE``); the ids deleted."""
    gone = []
    sql = f"""DELETE FROM sessions WHERE id IN (
        SELECT s.id FROM sessions s WHERE s.id = ? AND {LAST_ACTIVE} < ?
        AND NOT EXISTS (SELECT 1 FROM sessions f WHERE f.parent = s.id))"""
    for session in sessions:
        if db.execute(sql, (session, idle_since)).rowcount:
            gone.append(session)
    return gone


def collect_garbage(db: sqlite3.Connection) -> tuple[int, int]:
    """Delete the texts no event or snapshot refers to; how many, and their bytes."""
    unreferenced = "FROM blobs WHERE hash NOT IN (SELECT hash FROM blob_refs)"
    count, size = db.execute(f"SELECT count(*), coalesce(sum(length(data)), 0) {unreferenced}").fetchone()
    db.execute(f"DELETE {unreferenced}")
    return count, size
