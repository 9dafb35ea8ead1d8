"""Reading the store: a connection of its own beside the writer (WAL lets it run beside the
commits), one read at a time on the store's reading thread, SQLite's errors translated.

Every reader gets events whole: the texts stored apart (``_blobs.py``) of the range it
reads are fetched in one query and put back in place. A fork's history is read from its
ancestors' rows up to where it forked, then its own (``_numbering.py``), each event with
the fork's id in ``session``. A snapshot is read with its texts (``blob_refs`` seq 0).
"""

from __future__ import annotations

import os
import sqlite3
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import msgpack
import trio

from roost.loop import Event
from roost.protocol import pack

from ._blobs import MissingBlob, decompress, unpack_body
from ._errors import StoreDamaged, store_error
from ._numbering import Numbering
from ._schema import LAST_ACTIVE

_T = TypeVar("_T")


#: Characters of a session's title (its first task's first line).
TITLE_LENGTH = 60


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
    #: Its first task, shortened to one line (a fork without runs of its own: "").
    title: str = ""


class Reader:
    """The store's reads (see :class:`EventStore` for what each returns).

    Resource handling:
        Its thread comes from the store's limiter; the connection is the store's, which
        closes it.

    Error handling:
        Every read raises :class:`StoreError`: :class:`StoreDamaged` when a stored text
        is missing.
    """

    def __init__(self, path: Path, db: sqlite3.Connection, threads: trio.CapacityLimiter, seqs: Numbering) -> None:
        self._path = path
        self._db = db
        self._threads = threads
        self._seqs = seqs
        self._lock = trio.Lock()

    async def events(self, session: str, since: int = 0, limit: int | None = None) -> list[Event]:
        """A session's stored events after ``since``, whole, as :class:`Event` values."""
        segments = self._seqs.segments(session)

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
        """A session's stored events after ``since``, as (seq, msgpack), packed again only
        where a text is put back or the session is a fork's."""
        segments = self._seqs.segments(session)

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

    async def history(self, session: str, format: str) -> tuple[Any, list[Event]]:
        """A session's snapshot of ``format`` with its texts, and the events after it."""
        segments = self._seqs.segments(session)

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
        """The sessions' rows; a fork's count and last status include what it shares."""
        rows = await self._read(
            f"""SELECT s.id, s.cwd, s.created, s.parent, s.forked_at,
                (SELECT count(*) FROM events e WHERE e.session = s.id),
                (SELECT body FROM events e WHERE e.session = s.id AND e.type = 'run.finished'
                 ORDER BY seq DESC LIMIT 1),
                {LAST_ACTIVE},
                (SELECT body FROM events e WHERE e.session = s.id AND e.type = 'run.started'
                 ORDER BY seq LIMIT 1)
               FROM sessions s {"WHERE s.id = ?" if only is not None else ""} ORDER BY s.created""",
            (only,) if only is not None else (),
        )
        out = []
        for id, cwd, created, parent, forked_at, count, last, active, first in rows:
            status = _unpack(last)["reason"] if last else None
            if parent is not None:
                count += forked_at
                if status is None:
                    status = await self._inherited_status(id)
            title = await self._title(first) if first is not None else ""
            out.append(SessionRow(id, cwd, created, count, status, parent, forked_at, active, title))
        return out

    async def media(self, digest: str) -> bytes | None:
        """The bytes of the blob ``digest`` (hex) names, or None."""
        try:
            key = bytes.fromhex(digest)
        except ValueError:
            return None
        rows = await self._read("SELECT zlib, data FROM blobs WHERE hash = ?", (key,))
        if not rows:
            return None
        compressed, data = rows[0]
        return zlib.decompress(data) if compressed else bytes(data)

    async def _title(self, body: bytes) -> str:
        """The first line of a ``run.started`` body's task, up to :data:`TITLE_LENGTH`
        characters (a task stored apart is read back for it)."""
        task = _unpack(body).get("task", "")
        if isinstance(task, msgpack.ExtType):
            rows = await self._read("SELECT zlib, data FROM blobs WHERE hash = ?", (task.data,))
            task = decompress(rows[0][1], bool(rows[0][0])) if rows else ""
        lines = [line.strip() for line in str(task).splitlines() if line.strip()]
        first = lines[0] if lines else ""
        return first if len(first) <= TITLE_LENGTH else first[: TITLE_LENGTH - 1] + "…"

    async def _inherited_status(self, session: str) -> str | None:
        """The reason the last run a fork shares with its ancestors ended."""
        for source, after, upto in reversed(self._seqs.segments(session)[:-1]):
            rows = await self._read(
                """SELECT body FROM events WHERE session = ? AND type = 'run.finished'
                   AND seq > ? AND seq <= ? ORDER BY seq DESC LIMIT 1""",
                (source, after, upto),
            )
            if rows:
                return _unpack(rows[0][0])["reason"]
        return None

    async def size(self) -> tuple[int, int]:
        """The file's bytes (with its WAL) and its free pages' bytes."""

        def measure(db: sqlite3.Connection) -> tuple[int, int]:
            (page,) = db.execute("PRAGMA page_size").fetchone()
            (free,) = db.execute("PRAGMA freelist_count").fetchone()
            total = sum(os.path.getsize(f) for f in (self._path, f"{self._path}-wal") if os.path.exists(f))
            return total, free * page

        return await self._read_with(measure)

    async def open_runs(self) -> list[str]:
        """Sessions whose last own run (not a sub-agent's: no ``path``) did not finish."""
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
        """Where ``run`` started."""
        rows = await self._read("SELECT session FROM events WHERE type = 'run.started' AND run = ? LIMIT 1", (run,))
        return rows[0][0] if rows else None

    async def run_started_at(self, session: str, run: str) -> int | None:
        """The seq of ``run``'s start in ``session``'s history, a fork's ancestors' included."""
        segments = self._seqs.segments(session)
        where = " OR ".join("(session = ? AND seq > ? AND seq <= ?)" for _ in segments)
        args = tuple(v for segment in segments for v in segment)
        rows = await self._read(
            f"SELECT min(seq) FROM events WHERE type = 'run.started' AND run = ? AND ({where})", (run, *args)
        )
        return rows[0][0] if rows else None

    async def request_ids(self) -> dict[str, tuple[str, str]]:
        """Dispatch idempotency keys: key -> (session, run)."""
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
        async with self._lock:
            try:
                return await trio.to_thread.run_sync(read, self._db, limiter=self._threads)
            except sqlite3.Error as exc:
                raise store_error(exc, self._path) from exc
            except MissingBlob as exc:
                raise StoreDamaged(self._path, f"the database {self._path} is damaged ({exc})") from exc


def _read_events(
    db: sqlite3.Connection, segments: Sequence[tuple[str, int, int]], since: int, limit: int | None
) -> tuple[list[tuple[str, int, bytes]], set[int], dict[bytes, str]]:
    """(where it is stored, seq, body) of the events after ``since`` (at most ``limit``) of
    a session stored as ``segments`` (see :meth:`Numbering.segments`), the seqs among them
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
