"""The store's one writer: what is appended, committed in batches (group commit).

Events arrive numbered (``_numbering.py``) as rows (:func:`event_row`); each caller queues
its rows and waits. The writer's own thread takes everything queued, commits it in a single
transaction, and only then wakes the callers, all with one call into the event loop: an
event is durable before anyone publishes it, and the runs appending at the same time share
a commit (and its fsync). The event loop only queues and is woken: a hop through a trio
task and one of trio's worker threads per batch cost about 100 µs of its CPU per step more
(bench/daemon_cpu.py). Once queued, rows reach the disk even if their caller, or the
daemon, is cancelled: the wait cannot be cancelled, and a cancelled writer commits what
is queued before it stops.

Work of the store's own that writes (a snapshot, deleting sessions, collecting garbage:
``_maintenance.py``) goes through the same queue, in a transaction of its own or batched
with appends, so there is never a second writer. After each batch the writer reports how
many rows it wrote (the checkpointer counts them); a commit never checkpoints.

Error handling:
    A commit that fails stores nothing of its batch (the transaction is rolled back, the
    file stays whole). The appends batched with it are committed again one by one, so that
    one that cannot be stored (a large one on a nearly full disk) fails alone, and a
    session's later append is not stored when its earlier one was not. Each caller whose
    rows were not stored gets a :class:`StoreError`. Once there is room again, the next
    commit works.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from queue import Empty, SimpleQueue
from typing import Any, Callable, Sequence, TypeVar

import trio

from roost.loop import Event

from ._blobs import Blob, compress, pack_body
from ._errors import StoreError, store_error
from ._schema import transaction

_T = TypeVar("_T")

#: A row for the writer, one of: ``("session", id, cwd, created, parent, forked_at)``, a new
#: session; ``("event", session, seq, run, type, ts, body, blobs)``, an event (see
#: :func:`event_row`); ``("work", work, out)``, ``work(db)`` run in the transaction, its
#: result put in the list ``out``.
Row = tuple[Any, ...]
#: What is queued: a caller's rows, the task that waits for them to be committed (or
#: not), and the errors that say why not.
_Queued = tuple[list[Row], trio.lowlevel.Task, list[BaseException]]


def session_row(session: str, cwd: str, created: float, parent: str | None, forked_at: int | None) -> Row:
    """The row that records a new session."""
    return ("session", session, cwd, created, parent, forked_at)


def event_row(event: Event) -> Row:
    """The row of a numbered event: its body packed, its long texts apart."""
    body, blobs = pack_body(event.to_map())
    return ("event", event.session, event.seq, event.run, event.type, event.ts, body, blobs)


class Writer:
    """Commits queued rows in batches, on the store's one writing connection.

    Resource handling:
        Run :meth:`run` in a nursery for the store's lifetime; :meth:`stop` lets it finish
        what is queued and return. It commits on a thread of its own, which it starts and
        joins, one batch at a time; the connection is the store's, which closes it.

    Error handling:
        :meth:`submit` and :meth:`work` raise :class:`StoreError` (see the module).
    """

    def __init__(
        self, path: Path, db: sqlite3.Connection, committed: Callable[[int], None]
    ) -> None:
        self._path = path
        self._db = db
        self._committed = committed
        # Unbounded: a caller waits for its own rows, so there is at most one append per
        # task waiting (and the store's own work).
        self._queue: SimpleQueue[_Queued | None] = SimpleQueue()
        self._stopped = False
        self._crashed: Exception | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Commit what is queued, in batches, on the writer's thread, until :meth:`stop`;
        then return, once everything queued before it is committed. Cancelled, it stops the
        same way: what was queued still reaches the disk.

        Raises:
            Exception: a bug in committing (not a store error: those are the callers'), once
            the callers of its batch were told.
        """
        ended, finished = trio.Event(), trio.Event()
        token = trio.lowlevel.current_trio_token()
        thread = threading.Thread(
            target=self._write, args=(token, ended, finished), name="roost store writer", daemon=True
        )
        thread.start()
        task_status.started()
        try:
            await ended.wait()
        finally:
            self.stop()
            with trio.CancelScope(shield=True):
                await finished.wait()
            thread.join()
        if self._crashed is not None:
            raise self._crashed

    def stop(self) -> None:
        """Let :meth:`run` finish the queued batches and return; appends after this fail."""
        if not self._stopped:
            self._stopped = True
            self._queue.put(None)

    async def submit(self, rows: list[Row]) -> None:
        """Queue ``rows`` and wait until they are committed.

        Raises:
            StoreError: none of them was stored (or the writer has stopped).
        """
        if self._stopped:
            raise StoreError(self._path, f"{self._path} is closing: nothing more is stored")
        errors: list[BaseException] = []
        self._queue.put((rows, trio.lowlevel.current_task(), errors))
        # Not cancellable: once numbered, the rows must reach the disk even if the caller is
        # cancelled, and it learns whether they did.
        await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)
        if errors:
            raise errors[0]

    async def work(self, work: Callable[[sqlite3.Connection], _T]) -> _T:
        """``work(writer)`` on the writer's thread, in a transaction of its own (or batched
        with appends); its result.

        Raises:
            StoreError: it failed; nothing of it was committed.
        """
        out: list[_T] = []
        await self.submit([("work", work, out)])
        return out[0]

    def _write(self, token: trio.lowlevel.TrioToken, ended: trio.Event, finished: trio.Event) -> None:
        """The writer's thread: take everything queued, commit it as one batch, and wake its
        callers with one call into the event loop; until :meth:`stop`. After a bug in
        committing, each batch fails with it (no caller is left waiting) and :meth:`run`
        is told at once."""
        queue = self._queue
        stopping = False
        while not stopping:
            batch = [queue.get()]
            while True:
                try:
                    batch.append(queue.get_nowait())
                except Empty:
                    break
            stopping = None in batch
            appends = [item for item in batch if item is not None]
            if not appends:
                continue
            if self._crashed is None:
                try:
                    self._commit_batch(appends)
                except Exception as exc:
                    self._crashed = exc
                    token.run_sync_soon(ended.set)
            if self._crashed is not None:
                for _, _, errors in appends:
                    errors.append(self._crashed)
            token.run_sync_soon(self._wake, appends)
        token.run_sync_soon(ended.set)
        token.run_sync_soon(finished.set)

    def _wake(self, batch: list[_Queued]) -> None:
        """In the event loop: the batch's callers go on, and the checkpointer counts."""
        for _, task, _ in batch:
            trio.lowlevel.reschedule(task)
        self._committed(sum(len(rows) for rows, _, _ in batch))

    def _commit_batch(self, batch: list[_Queued]) -> None:
        """Commit a batch of appends in one transaction (blocking); when that fails, each
        append alone, and record the error of each that fails."""
        try:
            self._commit([row for rows, _, _ in batch for row in rows])
            return
        except (sqlite3.Error, OSError) as exc:
            if len(batch) == 1:
                batch[0][2].append(store_error(exc, self._path))
                return
        failed: dict[str, StoreError] = {}
        for rows, _, errors in batch:
            # A session's later append must not be stored when its earlier one was not.
            earlier = next((failed[s] for s in _sessions_of(rows) if s in failed), None)
            if earlier is not None:
                errors.append(type(earlier)(earlier.path, str(earlier)))
                continue
            try:
                self._commit(rows)
            except (sqlite3.Error, OSError) as exc:
                error = store_error(exc, self._path)
                errors.append(error)
                failed.update((s, error) for s in _sessions_of(rows))

    def _commit(self, rows: list[Row]) -> None:
        db = self._db
        with transaction(db):
            sessions = [r[1:] for r in rows if r[0] == "session"]
            events = [r[1:7] for r in rows if r[0] == "event"]
            if sessions:
                db.executemany(
                    "INSERT INTO sessions (id, cwd, created, parent, forked_at) VALUES (?, ?, ?, ?, ?)", sessions
                )
            if events:
                db.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)", events)
            for row in rows:
                if row[0] == "event" and row[7]:
                    store_blobs(db, row[1], row[2], row[7])
                elif row[0] == "work":
                    # Set, not added to: a batch that failed is committed again piece by piece.
                    row[2][:] = [_do(row[1], db)]


def store_blobs(db: sqlite3.Connection, session: str, seq: int, blobs: Sequence[Blob]) -> None:
    """Store the texts an event (or a session's record: seq 0) refers to, each once."""
    for blob in blobs:
        if db.execute("SELECT 1 FROM blobs WHERE hash = ?", (blob.digest,)).fetchone() is None:
            data, compressed = compress(blob.data)
            db.execute("INSERT INTO blobs VALUES (?, ?, ?, ?)", (blob.digest, len(blob.data), compressed, data))
        db.execute("INSERT OR IGNORE INTO blob_refs VALUES (?, ?, ?)", (session, seq, blob.digest))


def _do(work: Callable[[sqlite3.Connection], Any], db: sqlite3.Connection) -> Any:
    """``work(db)``; a bug in it fails that work (as SQLite's errors do), never the writer."""
    try:
        return work(db)
    except (sqlite3.Error, OSError):
        raise
    except Exception as exc:
        raise sqlite3.Error(f"{type(exc).__name__}: {exc}") from exc


def _sessions_of(rows: list[Row]) -> set[str]:
    """The sessions whose records ``rows`` write (work of the writer's own writes none)."""
    return {r[1] for r in rows if r[0] in ("session", "event")}


#: The ``blob_refs`` seq of the media a session holds (an image a tool read, one a task
#: carried): the session refers to them as long as it exists. Events name them by digest
#: in their parts (``"sha256"``); seq 0 is the snapshot's.
MEDIA_SEQ = -1


def store_media(db: sqlite3.Connection, session: str, blob: Blob) -> None:
    """Store a session's media bytes once, referred to by the session itself; as they are
    (images and PDFs are compressed already: zlib would only hold up the writer)."""
    db.execute("INSERT OR IGNORE INTO blobs VALUES (?, ?, ?, ?)", (blob.digest, len(blob.data), False, blob.data))
    db.execute("INSERT OR IGNORE INTO blob_refs VALUES (?, ?, ?)", (session, MEDIA_SEQ, blob.digest))
