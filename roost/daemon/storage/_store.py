"""The event store: SQLite in WAL mode, one writer with group commit.

Design: every stored event gets the next per-session ``seq`` the moment it is appended (in
the trio thread, so numbering follows call order), then joins a batch that one writer task
commits in a single transaction on a worker thread. ``append`` returns only once the batch
is committed, so an event is durable before anyone publishes it. Reads use a second
connection (WAL lets them run beside the writer). The store's worker threads are its own
(a limiter of two: the writer and the reader), so no amount of other work in threads (tool
calls, config reads) can keep it from committing.

The writer, its batches and their errors: ``_writer.py``. Checkpoints are never a
commit's: a checkpointer beside the writer copies the WAL into the file; it and the store's
other upkeep (snapshots, deletes, garbage) are in ``_maintenance.py``.

Large texts of events (a tool's output, a file a call writes) are stored once, by content,
in ``blobs``, and referenced from the events that hold them (``blob_refs``); every reader
gets them back in place (see ``_blobs.py``). A blob nothing refers to any more (its
sessions were pruned) is removed by :meth:`EventStore.collect_garbage`.

The tables, their numbered migrations and how a connection is opened: ``_schema.py``.

Forks share what they do not change. A fork's row names its parent and ``forked_at``, the
last seq of the parent's history it starts from; only the fork's own events (numbered from
``forked_at + 1``) are stored under its id. Reading a fork's events reads its ancestors'
up to those seqs, then its own, each with the fork's id in ``session``: the same history,
seqs and fold as if it had been copied. A fork of a fork chains. A session with forks
cannot be deleted (the foreign key restricts it).

Error handling:
    What SQLite and the file system report is translated once, into :class:`StoreError`,
    :class:`StoreFull` or :class:`StoreDamaged` (see ``_errors.py``).

    A commit that fails stores nothing of its appends (see ``_writer.py``) and gives their
    seq numbers back. Once there is room again, the next commit works.
"""

from __future__ import annotations

import os
import sqlite3
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import trio

from roost.loop import Event
from roost.protocol import pack

from ._blobs import MissingBlob, decompress, unpack_body
from ._errors import StoreDamaged, StoreError, StoreFull, set_aside, store_error
from ._maintenance import Checkpointer, collect_garbage, delete_idle, write_snapshot
from ._schema import LAST_ACTIVE, connect, make_private, migrate
from ._writer import Writer, event_row, session_row

__all__ = ["EventStore", "SessionRow", "StoreDamaged", "StoreError", "StoreFull", "set_aside"]

_T = TypeVar("_T")

@dataclass(frozen=True, slots=True)
class SessionRow:
    """A session as listed: the fields ``sessions.list`` reports."""

    id: str
    cwd: str
    created: float
    events: int
    last_status: str | None
    #: The session this one was forked from, and the last seq of its history it shares.
    parent: str | None = None
    forked_at: int | None = None
    #: When its own last event happened (when it was created, if it has none).
    last_active: float = 0.0


#: A seq above any a session will have (an open upper bound in queries).
_NO_END = 1 << 62


class EventStore:
    """Sessions and their events in one SQLite file.

    Resource handling:
        Open with :meth:`open`; run :meth:`run_writer` in a nursery (``nursery.start``) for
        the store's lifetime; :meth:`close` when done. Its worker threads come from its
        own limiter.

    Error handling:
        Every method that reads or writes raises :class:`StoreError` (see the module).
    """

    def __init__(
        self, path: Path, writer: sqlite3.Connection, reader: sqlite3.Connection, checkpointer: sqlite3.Connection
    ) -> None:
        self.path = path
        self._writer = writer
        self._reader = reader
        self._checkpointer = checkpointer
        # One thread commits, one reads (under _read_lock): two are all the store uses.
        self._threads = trio.CapacityLimiter(2)
        self._checkpoints = Checkpointer(checkpointer)
        self._commits = Writer(path, writer, self._threads, self._checkpoints.committed)
        self._read_lock = trio.Lock()
        self._next_seq: dict[str, int] = {}
        #: Forks: session -> (parent, forked_at).
        self._forks: dict[str, tuple[str, int]] = {}
        for session, parent, forked_at in writer.execute(
            "SELECT id, parent, forked_at FROM sessions WHERE parent IS NOT NULL"
        ):
            self._forks[session] = (parent, forked_at)
            self._next_seq[session] = forked_at + 1
        for session, last in writer.execute("SELECT session, max(seq) FROM events GROUP BY session"):
            self._next_seq[session] = last + 1

    @classmethod
    def open(cls, path: Path, *, sync: str = "normal") -> EventStore:
        """Open (creating and migrating as needed) the database at ``path``.

        ``sync`` is SQLite's ``synchronous`` for the writer: ``normal`` (WAL: a committed
        event survives the daemon being killed, and the file is never corrupted; the last
        commits can be lost on power loss) or ``full`` (an fsync per commit: they survive
        power loss too, for about 0.35 ms per commit on this kind of disk).

        The file is 0600, and so are the ``-wal`` and ``-shm`` files SQLite makes beside it.

        Raises:
            NotPrivate: ``path`` is a symbolic link.
            StoreFull: no room on the disk to open it (SQLite needs some for ``-wal``,
                ``-shm``, and to create or migrate the file).
            StoreDamaged: the file is not a database, or is malformed; it was not changed.
            StoreError: the file cannot be opened or read otherwise.
        """
        if sync not in ("normal", "full"):
            raise ValueError(f"sync must be normal or full, not {sync!r}")
        opened: list[sqlite3.Connection] = []
        try:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            make_private(path)
            opened.append(writer := connect(path))
            writer.execute(f"PRAGMA synchronous={sync.upper()}")
            migrate(writer)
            opened.append(reader := connect(path))
            opened.append(checkpointer := connect(path))
            return cls(path, writer, reader, checkpointer)
        except (sqlite3.Error, OSError) as exc:
            for db in opened:
                db.close()
            raise store_error(exc, path) from exc

    def close(self) -> None:
        """Close the connections (the last one to close checkpoints what is left)."""
        self._checkpointer.close()
        self._reader.close()
        self._writer.close()

    async def run_writer(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Commit appended events in batches until the queue is closed, and checkpoint beside
        the commits. Never returns early."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._checkpoints.run)
            await self._commits.run(task_status=task_status)
            nursery.cancel_scope.cancel()

    def stop_writer(self) -> None:
        """Let the writer finish the queued batches and return."""
        self._commits.stop()

    async def create_session(
        self,
        session: str,
        cwd: str,
        created: float,
        first: Sequence[Event] = (),
        *,
        parent: str | None = None,
        forked_at: int = 0,
    ) -> list[Event]:
        """Record a new session and its ``first`` events, durably and together (a session
        is never stored without them); return the events numbered.

        With ``parent``, the session is a fork: its history is the parent's up to
        ``forked_at`` (shared, not copied), then ``first``, numbered from ``forked_at + 1``.
        """
        if session in self._next_seq:
            raise ValueError(f"session {session} exists")
        if parent is not None and not 0 < forked_at <= self.last_seq(parent):
            raise ValueError(f"session {parent} has no seq {forked_at} to fork at")
        start = forked_at if parent is not None else 0
        self._next_seq[session] = start + 1
        if parent is not None:
            self._forks[session] = (parent, forked_at)
        try:
            numbered, rows = self._number(first)
            self._next_seq[session] = start + len(numbered) + 1
            await self._commits.submit([session_row(session, cwd, created, parent, forked_at if parent else None), *rows])
        except BaseException:
            del self._next_seq[session]
            self._forks.pop(session, None)
            raise
        return numbered

    async def append(self, events: Sequence[Event]) -> list[Event]:
        """Number ``events`` and store them durably; return the numbered events.

        Live events are not accepted: they are never stored.

        Raises:
            StoreError: nothing was stored (:class:`StoreFull` when the disk is full); the
                seq numbers were not used up.
        """
        numbered, rows = self._number(events)
        if not rows:
            return numbered
        # Numbers are taken only once every row is packed, and given back if the commit
        # fails: a failed append never leaves a gap in a session's seqs.
        last = {e.session: e.seq + 1 for e in numbered if e.seq is not None}
        before = {session: self._next_seq.get(session, 1) for session in last}
        self._next_seq.update(last)
        try:
            await self._commits.submit(rows)
        except BaseException:
            for session, first in before.items():
                if self._next_seq.get(session) == last[session]:
                    self._next_seq[session] = first
            raise
        return numbered

    def _number(self, events: Sequence[Event]) -> tuple[list[Event], list[tuple[Any, ...]]]:
        """``events`` numbered after what each session has, and their rows (packed)."""
        numbered = []
        rows = []
        next_seq: dict[str, int] = {}
        for event in events:
            if event.live:
                raise ValueError(f"live event {event.type} cannot be stored")
            seq = next_seq.get(event.session) or self._next_seq.get(event.session, 1)
            next_seq[event.session] = seq + 1
            event = event.numbered(seq)
            numbered.append(event)
            rows.append(event_row(event))
        return numbered, rows

    def last_seq(self, session: str) -> int:
        """The highest seq stored (or queued) for ``session``; 0 if none."""
        return self._next_seq.get(session, 1) - 1

    def session_count(self) -> int:
        """How many sessions exist."""
        return len(self._next_seq)

    def has_session(self, session: str) -> bool:
        """Whether the session exists."""
        return session in self._next_seq

    def parent(self, session: str) -> tuple[str, int] | None:
        """The session ``session`` was forked from and the seq it was forked at (None: not
        a fork)."""
        return self._forks.get(session)

    def _segments(self, session: str) -> list[tuple[str, int, int]]:
        """Where ``session``'s history is stored: (session, after, upto) ranges of seqs,
        oldest first, from its first ancestor down to itself."""
        out = []
        upto = _NO_END
        node = session
        while True:
            link = self._forks.get(node)
            after = link[1] if link is not None else 0
            if upto > after:
                out.append((node, after, upto))
            if link is None:
                return out[::-1]
            upto = min(upto, after)
            node = link[0]

    async def events(self, session: str, since: int = 0, limit: int | None = None) -> list[Event]:
        """Stored events of ``session`` with ``seq > since``, in order, whole (the texts
        stored apart put back; for a fork: its ancestors' up to where it forked, then its
        own, all with ``session`` its id)."""
        segments = self._segments(session)

        def read(db: sqlite3.Connection) -> list[Event]:
            rows, _, texts = _read_events(db, segments, since, limit)
            out = []
            for source, _, body in rows:
                event = unpack_body(body, texts)
                if source != session:
                    event["session"] = session  # an ancestor's event, as the fork's own
                out.append(Event.from_map(event))
            return out

        return await self._read_with(read)

    async def packed_events(self, session: str, since: int = 0, limit: int | None = None) -> list[tuple[int, bytes]]:
        """Stored events of ``session`` with ``seq > since`` (at most ``limit``), in order,
        as (seq, the event map in msgpack): what is sent to clients, as stored (packed
        again only when it refers to texts stored apart, or is a fork's ancestor's)."""
        segments = self._segments(session)

        def read(db: sqlite3.Connection) -> list[tuple[int, bytes]]:
            rows, with_refs, texts = _read_events(db, segments, since, limit)
            out = []
            for source, seq, body in rows:
                if seq in with_refs or source != session:
                    event = unpack_body(body, texts)
                    event["session"] = session
                    body = pack(event)
                out.append((seq, body))
            return out

        return await self._read_with(read)

    async def save_snapshot(self, session: str, seq: int, format: str, state: Callable[[], Any]) -> None:
        """Keep ``state()`` (plain data) as ``session``'s state as of ``seq``, in place of
        its earlier snapshot. Made and packed on the writer's thread (a long history is a
        lot to copy and hash); its long texts are stored once, as blobs."""

        await self._commits.work(lambda db: write_snapshot(db, session, seq, format, state))

    async def history(self, session: str, format: str) -> tuple[Any, list[Event]]:
        """What loading ``session`` folds: its snapshot of that ``format`` (None: none),
        and the stored events after it, whole (as :meth:`events` gives them)."""
        segments = self._segments(session)

        def read(db: sqlite3.Connection) -> tuple[Any, list[Event]]:
            state, since = None, 0
            row = db.execute(
                "SELECT seq, body FROM snapshots WHERE session = ? AND format = ?", (session, format)
            ).fetchone()
            if row is not None:
                since = row[0]
                texts = {}
                for digest, compressed, data in db.execute(
                    """SELECT b.hash, b.zlib, b.data FROM blob_refs r JOIN blobs b ON b.hash = r.hash
                       WHERE r.session = ? AND r.seq = 0""",
                    (session,),
                ):
                    texts[digest] = decompress(data, bool(compressed))
                state = unpack_body(zlib.decompress(row[1]), texts)
            rows, _, texts = _read_events(db, segments, since, None)
            events = []
            for source, _, body in rows:
                event = unpack_body(body, texts)
                if source != session:
                    event["session"] = session
                events.append(Event.from_map(event))
            return state, events

        return await self._read_with(read)

    async def sessions(self, only: str | None = None) -> list[SessionRow]:
        """Every session (or the one named ``only``) with its event count (a fork's counts
        what it shares) and the reason its last run ended."""
        rows = await self._read(
            f"""SELECT s.id, s.cwd, s.created, s.parent, s.forked_at,
                (SELECT count(*) FROM events e WHERE e.session = s.id),
                (SELECT body FROM events e WHERE e.session = s.id AND e.type = 'run.finished'
                 ORDER BY seq DESC LIMIT 1),
                {LAST_ACTIVE}
               FROM sessions s {"WHERE s.id = ?" if only is not None else ""} ORDER BY s.created""",
            (only,) if only is not None else (),
        )
        out = []
        for id, cwd, created, parent, forked_at, count, last, active in rows:
            status = _unpack(last)["reason"] if last else None
            if parent is not None:
                count += forked_at
                if status is None:
                    status = await self._inherited_status(id)
            out.append(SessionRow(id, cwd, created, count, status, parent, forked_at, active))
        return out

    async def _inherited_status(self, session: str) -> str | None:
        """The reason the last run a fork shares with its ancestors ended."""
        for source, after, upto in reversed(self._segments(session)[:-1]):
            rows = await self._read(
                """SELECT body FROM events WHERE session = ? AND type = 'run.finished'
                   AND seq > ? AND seq <= ? ORDER BY seq DESC LIMIT 1""",
                (source, after, upto),
            )
            if rows:
                return _unpack(rows[0][0])["reason"]
        return None

    async def delete_sessions(self, sessions: Sequence[str], idle_since: float) -> list[str]:
        """Delete, in this order, those of ``sessions`` with no activity since
        ``idle_since`` and no forks left (both checked again here: an event stored meanwhile
        keeps its session, and a fork kept keeps its parent), with their events and
        snapshots; return the ids deleted. Give forks before their parents. The texts they
        referred to stay until :meth:`collect_garbage`. The caller makes sure nothing
        appends to them."""

        gone = await self._commits.work(lambda db: delete_idle(db, sessions, idle_since))
        for session in gone:
            self._next_seq.pop(session, None)
            self._forks.pop(session, None)
        return gone

    async def collect_garbage(self) -> tuple[int, int]:
        """Remove the texts that nothing refers to any more (their sessions were deleted);
        how many, and the bytes they took in the database (free pages, reused by later
        writes: the file keeps its size)."""

        return await self._commits.work(collect_garbage)

    async def size(self) -> tuple[int, int]:
        """Bytes of the database file (with its write-ahead log), and of its free pages."""

        def measure(db: sqlite3.Connection) -> tuple[int, int]:
            (page,) = db.execute("PRAGMA page_size").fetchone()
            (free,) = db.execute("PRAGMA freelist_count").fetchone()
            total = sum(os.path.getsize(f) for f in (self.path, f"{self.path}-wal") if os.path.exists(f))
            return total, free * page

        return await self._read_with(measure)

    async def open_runs(self) -> list[str]:
        """Sessions whose last run started and never finished (a daemon died mid-run).

        Only the sessions' own runs count: a sub-agent's (its events carry a ``path``)
        starts and finishes inside its caller's run. A fork never shares an open run: one
        it was cut from ends among its own first events.
        """
        rows = await self._read(
            "SELECT session, type, body FROM events WHERE type IN ('run.started', 'run.finished') ORDER BY session, seq",
            (),
        )
        open_: dict[str, bool] = {}
        for session, type, body in rows:
            if not _unpack(body).get("path"):
                open_[session] = type == "run.started"
        return [session for session, is_open in open_.items() if is_open]

    async def run_session(self, run: str) -> str | None:
        """The session in which ``run`` (or a sub-agent's run) started; None if none did."""
        rows = await self._read("SELECT session FROM events WHERE type = 'run.started' AND run = ? LIMIT 1", (run,))
        return rows[0][0] if rows else None

    async def run_started_at(self, session: str, run: str) -> int | None:
        """The seq of ``run``'s ``run.started`` in ``session``'s history (a fork's included);
        None if it has none."""
        segments = self._segments(session)
        where = " OR ".join("(session = ? AND seq > ? AND seq <= ?)" for _ in segments)
        args = tuple(v for segment in segments for v in segment)
        rows = await self._read(
            f"SELECT min(seq) FROM events WHERE type = 'run.started' AND run = ? AND ({where})", (run, *args)
        )
        return rows[0][0] if rows else None

    async def request_ids(self) -> dict[str, tuple[str, str]]:
        """Every dispatch idempotency key seen: key -> (session, run)."""
        rows = await self._read("SELECT session, run, body FROM events WHERE type = 'run.started'", ())
        out = {}
        for session, run, body in rows:
            key = _unpack(body).get("request_id")
            if key:
                out[key] = (session, run)
        return out

    async def _read(self, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return await self._read_with(lambda db: db.execute(sql, args).fetchall())

    async def _read_with(self, read: Callable[[sqlite3.Connection], _T]) -> _T:
        """``read(reader)`` on the store's reading thread, SQLite's errors translated."""
        async with self._read_lock:
            try:
                return await trio.to_thread.run_sync(read, self._reader, limiter=self._threads)
            except sqlite3.Error as exc:
                raise store_error(exc, self.path) from exc
            except MissingBlob as exc:
                raise StoreDamaged(self.path, f"the database {self.path} is damaged ({exc})") from exc


def _read_events(
    db: sqlite3.Connection, segments: Sequence[tuple[str, int, int]], since: int, limit: int | None
) -> tuple[list[tuple[str, int, bytes]], set[int], dict[bytes, str]]:
    """(where it is stored, seq, body) of the events after ``since`` (at most ``limit``) of
    a session stored as ``segments`` (see :meth:`EventStore._segments`), the seqs among them
    whose bodies refer to stored texts, and those texts by digest."""
    parts = " UNION ALL ".join(
        "SELECT session, seq, body FROM events WHERE session = ? AND seq > ? AND seq <= ?" for _ in segments
    )
    sql = f"SELECT session, seq, body FROM ({parts}) ORDER BY seq" if len(segments) > 1 else parts + " ORDER BY seq"
    args: tuple[Any, ...] = tuple(v for source, after, upto in segments for v in (source, max(after, since), upto))
    if limit is not None:
        sql += " LIMIT ?"
        args += (limit,)
    rows = db.execute(sql, args).fetchall()
    if not rows:
        return rows, set(), {}
    last = rows[-1][1]
    with_refs: set[int] = set()
    texts: dict[bytes, str] = {}
    for source, after, upto in segments:
        if max(after, since) >= min(upto, last):
            continue
        for seq, digest, compressed, data in db.execute(
            """SELECT r.seq, b.hash, b.zlib, b.data FROM blob_refs r JOIN blobs b ON b.hash = r.hash
               WHERE r.session = ? AND r.seq > ? AND r.seq <= ?""",
            (source, max(after, since), min(upto, last)),
        ):
            with_refs.add(seq)
            if digest not in texts:
                texts[digest] = decompress(data, bool(compressed))
    return rows, with_refs, texts


def _unpack(body: bytes) -> Any:
    return unpack_body(body)
