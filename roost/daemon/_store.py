"""The event store: SQLite in WAL mode, one writer with group commit.

Design: every stored event gets the next per-session ``seq`` the moment it is appended (in
the trio thread, so numbering follows call order), then joins a batch that one writer task
commits in a single transaction on a worker thread. ``append`` returns only once the batch
is committed, so an event is durable before anyone publishes it. Reads use a second
connection (WAL lets them run beside the writer).

Migrations are numbered and named; applied names are recorded in ``_migrations``.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import msgpack
import trio

from roost.loop import Event

from ._paths import private_opener


def _m001_initial(db: sqlite3.Connection) -> None:
    db.execute(
        "CREATE TABLE sessions (id TEXT PRIMARY KEY, cwd TEXT NOT NULL, created REAL NOT NULL)"
    )
    db.execute(
        """CREATE TABLE events (
            session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            run TEXT,
            type TEXT NOT NULL,
            ts REAL NOT NULL,
            body BLOB NOT NULL,
            PRIMARY KEY (session, seq)
        ) WITHOUT ROWID"""
    )
    db.execute("CREATE INDEX events_type ON events(type, session)")


MIGRATIONS: list[tuple[str, Callable[[sqlite3.Connection], None]]] = [
    ("m001_initial", _m001_initial),
]


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A session as listed: the fields ``sessions.list`` reports."""

    id: str
    cwd: str
    created: float
    events: int
    last_status: str | None


class EventStore:
    """Sessions and their events in one SQLite file.

    Resource handling:
        Open with :meth:`open`; run :meth:`run_writer` in a nursery (``nursery.start``) for
        the store's lifetime; :meth:`close` when done.
    """

    def __init__(self, path: Path, writer: sqlite3.Connection, reader: sqlite3.Connection) -> None:
        self.path = path
        self._writer = writer
        self._reader = reader
        self._read_lock = trio.Lock()
        self._next_seq: dict[str, int] = {}
        self._queue_send, self._queue_receive = trio.open_memory_channel[
            tuple[list[tuple[Any, ...]], trio.Event, list[BaseException]]
        ](256)
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
        """
        if sync not in ("normal", "full"):
            raise ValueError(f"sync must be normal or full, not {sync!r}")
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _make_private(path)
        writer = _connect(path)
        writer.execute(f"PRAGMA synchronous={sync.upper()}")
        _migrate(writer)
        reader = _connect(path)
        return cls(path, writer, reader)

    def close(self) -> None:
        """Close both connections."""
        self._writer.close()
        self._reader.close()

    async def run_writer(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Commit appended events in batches until the queue is closed. Never returns early."""
        task_status.started()
        async with self._queue_receive:
            async for first in self._queue_receive:
                batch = [first]
                while True:
                    try:
                        batch.append(self._queue_receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                rows = [row for rows, _, _ in batch for row in rows]
                try:
                    with trio.CancelScope(shield=True):
                        await trio.to_thread.run_sync(self._commit, rows)
                except Exception as exc:
                    for _, _, errors in batch:
                        errors.append(exc)
                for _, done, _ in batch:
                    done.set()

    def stop_writer(self) -> None:
        """Let the writer finish the queued batches and return."""
        self._queue_send.close()

    def _commit(self, rows: list[tuple[Any, ...]]) -> None:
        with _transaction(self._writer):
            sessions = [r[1:] for r in rows if r[0] == "session"]
            events = [r[1:] for r in rows if r[0] == "event"]
            if sessions:
                self._writer.executemany("INSERT INTO sessions VALUES (?, ?, ?)", sessions)
            if events:
                self._writer.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)", events)

    async def create_session(self, session: str, cwd: str, created: float) -> None:
        """Record a new session (durably)."""
        self._next_seq.setdefault(session, 1)
        await self._submit([("session", session, cwd, created)])

    async def append(self, events: Sequence[Event]) -> list[Event]:
        """Number ``events`` and store them durably; return the numbered events.

        Live events are not accepted: they are never stored.
        """
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
            rows.append(
                ("event", event.session, seq, event.run, event.type, event.ts, _pack(event.to_map()))
            )
        if not rows:
            return numbered
        # Numbers are taken only once every row is packed, and given back if the commit
        # fails: a failed append never leaves a gap in a session's seqs.
        before = {session: self._next_seq.get(session, 1) for session in next_seq}
        self._next_seq.update(next_seq)
        try:
            await self._submit(rows)
        except BaseException:
            for session, first in before.items():
                if self._next_seq.get(session) == next_seq[session]:
                    self._next_seq[session] = first
            raise
        return numbered

    async def _submit(self, rows: list[tuple[Any, ...]]) -> None:
        done = trio.Event()
        errors: list[BaseException] = []
        # Once numbered, the rows must reach the disk even if the caller is cancelled.
        with trio.CancelScope(shield=True):
            await self._queue_send.send((rows, done, errors))
            await done.wait()
        if errors:
            raise errors[0]

    def last_seq(self, session: str) -> int:
        """The highest seq stored (or queued) for ``session``; 0 if none."""
        return self._next_seq.get(session, 1) - 1

    def session_count(self) -> int:
        """How many sessions exist."""
        return len(self._next_seq)

    def has_session(self, session: str) -> bool:
        """Whether the session exists."""
        return session in self._next_seq

    async def events(self, session: str, since: int = 0, limit: int | None = None) -> list[Event]:
        """Stored events of ``session`` with ``seq > since``, in order."""
        sql = "SELECT body FROM events WHERE session = ? AND seq > ? ORDER BY seq"
        args: tuple[Any, ...] = (session, since)
        if limit is not None:
            sql += " LIMIT ?"
            args += (limit,)
        rows = await self._read(sql, args)
        return [Event.from_map(_unpack(body)) for (body,) in rows]

    async def sessions(self) -> list[SessionRow]:
        """Every session with its event count and the reason its last run ended."""
        rows = await self._read(
            """SELECT s.id, s.cwd, s.created,
                (SELECT count(*) FROM events e WHERE e.session = s.id),
                (SELECT body FROM events e WHERE e.session = s.id AND e.type = 'run.finished'
                 ORDER BY seq DESC LIMIT 1)
               FROM sessions s ORDER BY s.created""",
            (),
        )
        return [
            SessionRow(id, cwd, created, count, _unpack(last)["reason"] if last else None)
            for id, cwd, created, count, last in rows
        ]

    async def open_runs(self) -> list[str]:
        """Sessions whose last run started and never finished (a daemon died mid-run).

        Only the sessions' own runs count: a sub-agent's (its events carry a ``path``)
        starts and finishes inside its caller's run.
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
        async with self._read_lock:
            return await trio.to_thread.run_sync(lambda: self._reader.execute(sql, args).fetchall())


def _make_private(path: Path) -> None:
    # Made 0600 before SQLite opens it, because SQLite creates the -wal and -shm files with
    # the database's mode. Ones left by a killed daemon are tightened too.
    os.close(private_opener(os.fspath(path), os.O_RDWR | os.O_CREAT))
    for leftover in (f"{path}-wal", f"{path}-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.close(private_opener(leftover, os.O_RDWR))


def _connect(path: Path) -> sqlite3.Connection:
    # Autocommit mode: transactions are explicit (see _transaction), DDL included.
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("PRAGMA busy_timeout=5000")
    return db


def _migrate(db: sqlite3.Connection) -> None:
    db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied REAL)")
    done = {name for (name,) in db.execute("SELECT name FROM _migrations")}
    for name, migration in MIGRATIONS:
        if name in done:
            continue
        with _transaction(db):
            migration(db)
            db.execute("INSERT INTO _migrations VALUES (?, julianday('now'))", (name,))


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def _unpack(body: bytes) -> Any:
    return msgpack.unpackb(body, raw=False, strict_map_key=False)
