"""The event store: SQLite in WAL mode, one writer with group commit.

Design: every stored event gets the next per-session ``seq`` the moment it is appended (in
the trio thread, so numbering follows call order), then joins a batch that the writer's
own thread commits in a single transaction. ``append`` returns only once the batch is
committed, so an event is durable before anyone publishes it. Reads use a second
connection (WAL lets them run beside the writer), one at a time under a limiter of their
own. Neither uses trio's default worker threads, so no amount of other work in threads
(tool calls, config reads) can keep the store from committing.

:class:`EventStore` is the one face of the store; it opens the database, owns its three
connections and hands each to the part that uses it:

- ``_schema.py``: the tables, their numbered migrations, how a connection is opened;
- ``_numbering.py``: each session's next seq, and where a fork's history is stored;
- ``_writer.py``: the one writer (the queue, group commit, a failed batch retried piece by
  piece);
- ``_reads.py``: every read, on the reading connection, texts put back, forks resolved;
- ``_maintenance.py``: the checkpointer beside the writer (no commit ever checkpoints),
  snapshots, deleting sessions, collecting texts nothing refers to;
- ``_errors.py``: what SQLite and the file system report, translated once; ``set_aside``;
- ``_blobs.py``: how an event's body refers to its long texts, stored once by content.

Error handling:
    Every read or write raises :class:`StoreError` (``_errors.py`` draws the tree:
    :class:`StoreFull`, :class:`StoreDamaged`). A commit that fails stores nothing of its
    appends (``_writer.py``) and gives their seq numbers back. Once there is room again,
    the next commit works.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Callable, Sequence

import trio

from roost.loop import Event

from ._blobs import media_blob
from ._errors import StoreDamaged, StoreError, StoreFull, set_aside, store_error
from ._maintenance import Checkpointer, collect_garbage, delete_idle, write_snapshot
from ._numbering import Numbering
from ._reads import Reader, SessionRow
from ._schema import connect, make_private, migrate
from ._writer import Writer, event_row, session_row, store_media

__all__ = ["EventStore", "SessionRow", "StoreDamaged", "StoreError", "StoreFull", "set_aside"]


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
        # One thread commits (the writer's), one reads at a time.
        self._seqs = Numbering.read(writer)
        self._checkpoints = Checkpointer(checkpointer)
        self._commits = Writer(path, writer, self._checkpoints.committed)
        self._reads = Reader(path, reader, trio.CapacityLimiter(1), self._seqs)

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

    # -- writing -------------------------------------------------------------------------

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
        numbered = self._seqs.add(session, first, parent, forked_at)
        try:
            record = session_row(session, cwd, created, parent, forked_at if parent else None)
            await self._commits.submit([record, *map(event_row, numbered)])
        except BaseException:
            self._seqs.forget(session)
            raise
        return numbered

    async def append(self, events: Sequence[Event]) -> list[Event]:
        """Number ``events`` and store them durably; return the numbered events.

        Live events are not accepted: they are never stored.

        Raises:
            StoreError: nothing was stored (:class:`StoreFull` when the disk is full); the
                seq numbers were not used up.
        """
        numbered = self._seqs.number(events)
        rows = [event_row(event) for event in numbered]
        if not rows:
            return numbered
        taken = self._seqs.take(numbered)
        try:
            await self._commits.submit(rows)
        except BaseException:
            self._seqs.give_back(taken)
            raise
        return numbered

    async def save_snapshot(self, session: str, seq: int, format: str, state: Callable[[], Any]) -> None:
        """Keep ``state()`` (plain data) as ``session``'s state as of ``seq``, in place of
        its earlier snapshot. Made and packed on the writer's thread (a long history is a
        lot to copy and hash); its long texts are stored once, as blobs."""
        await self._commits.work(lambda db: write_snapshot(db, session, seq, format, state))

    async def delete_sessions(self, sessions: Sequence[str], idle_since: float) -> list[str]:
        """Delete, in this order, those of ``sessions`` with no activity since
        ``idle_since`` and no forks left (both checked again here: an event stored meanwhile
        keeps its session, and a fork kept keeps its parent), with their events and
        snapshots; return the ids deleted. Give forks before their parents. The texts they
        referred to stay until :meth:`collect_garbage`. The caller makes sure nothing
        appends to them."""
        gone = await self._commits.work(lambda db: delete_idle(db, sessions, idle_since))
        for session in gone:
            self._seqs.forget(session)
        return gone

    async def collect_garbage(self) -> tuple[int, int]:
        """Remove the texts that nothing refers to any more (their sessions were deleted);
        how many, and the bytes they took in the database (free pages, reused by later
        writes: the file keeps its size)."""
        return await self._commits.work(collect_garbage)

    async def put_media(self, session: str, data: bytes) -> str:
        """Store ``data`` (an image's or a document's bytes) once, kept as long as
        ``session`` is; its SHA-256 in hex, which an event's part names it by."""
        blob = media_blob(data)
        await self._commits.work(lambda db: store_media(db, session, blob))
        return blob.digest.hex()

    # -- what is known without reading ---------------------------------------------------

    def last_seq(self, session: str) -> int:
        """The highest seq stored (or queued) for ``session``; 0 if none."""
        return self._seqs.last_seq(session)

    def session_count(self) -> int:
        """How many sessions exist."""
        return self._seqs.count()

    def has_session(self, session: str) -> bool:
        """Whether the session exists."""
        return self._seqs.has(session)

    def parent(self, session: str) -> tuple[str, int] | None:
        """The session ``session`` was forked from and the seq it was forked at (None: not
        a fork)."""
        return self._seqs.parent(session)

    # -- reading -------------------------------------------------------------------------

    async def events(self, session: str, since: int = 0, limit: int | None = None) -> list[Event]:
        """Stored events of ``session`` with ``seq > since``, in order, whole (the texts
        stored apart put back; for a fork: its ancestors' up to where it forked, then its
        own, all with ``session`` its id)."""
        if self._none_after(session, since):
            return []
        return await self._reads.events(session, since, limit)

    async def packed_events(self, session: str, since: int = 0, limit: int | None = None) -> list[tuple[int, bytes]]:
        """Stored events of ``session`` with ``seq > since`` (at most ``limit``), in order,
        as (seq, the event map in msgpack): what is sent to clients, as stored (packed
        again only when it refers to texts stored apart, or is a fork's ancestor's)."""
        if self._none_after(session, since):
            return []
        return await self._reads.packed_events(session, since, limit)

    def _none_after(self, session: str, since: int) -> bool:
        """Whether no event of ``session`` can be stored after ``since``, known without
        reading: everything stored was numbered, and nothing after the last seq numbered.
        A client attaching with the seq it has seen, or a dispatch attaching to its idle
        session, then makes no trip to the reading thread (under load, that trip waits its
        turn on the event loop)."""
        return since >= self._seqs.last_seq(session)

    async def history(self, session: str, format: str) -> tuple[Any, list[Event]]:
        """What loading ``session`` folds: its snapshot of that ``format`` (None: none),
        and the stored events after it, whole (as :meth:`events` gives them)."""
        return await self._reads.history(session, format)

    async def media(self, digest: str) -> bytes | None:
        """The media bytes stored under ``digest`` (hex, as :meth:`put_media` gave it);
        None: not stored (a malformed digest, or collected)."""
        return await self._reads.media(digest)

    async def sessions(self, only: str | None = None) -> list[SessionRow]:
        """Every session (or the one named ``only``) with its event count (a fork's counts
        what it shares) and the reason its last run ended."""
        return await self._reads.sessions(only)

    async def size(self) -> tuple[int, int]:
        """Bytes of the database file (with its write-ahead log), and of its free pages."""
        return await self._reads.size()

    async def open_runs(self) -> list[str]:
        """Sessions whose last run started and never finished (a daemon died mid-run).

        Only the sessions' own runs count: a sub-agent's (its events carry a ``path``)
        starts and finishes inside its caller's run. A fork never shares an open run: one
        it was cut from ends among its own first events.
        """
        return await self._reads.open_runs()

    async def run_session(self, run: str) -> str | None:
        """The session in which ``run`` (or a sub-agent's run) started; None if none did."""
        return await self._reads.run_session(run)

    async def run_started_at(self, session: str, run: str) -> int | None:
        """The seq of ``run``'s ``run.started`` in ``session``'s history (a fork's included);
        None if it has none."""
        return await self._reads.run_started_at(session, run)

    async def request_ids(self) -> dict[str, tuple[str, str]]:
        """Every dispatch idempotency key seen: key -> (session, run)."""
        return await self._reads.request_ids()
