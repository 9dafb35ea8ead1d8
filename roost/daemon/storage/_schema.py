"""The database's tables, their migrations, and how a connection to it is opened.

Migrations are numbered and named (:data:`MIGRATIONS`); applied names are recorded in
``_migrations``, and each runs in a transaction of its own.

Every connection is in WAL mode (readers run beside the one writer), enforces foreign keys,
waits for a lock rather than failing at once, and never checkpoints by itself: SQLite's
automatic checkpoint runs inside the commit that fills the WAL, so the store checkpoints on
a connection of its own, beside the writer (``_maintenance.py``). Transactions are
explicit (:func:`transaction`), DDL included.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import Callable, Iterator

from .._paths import private_opener


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


def _m002_forks(db: sqlite3.Connection) -> None:
    # A fork names its parent and the last seq of the parent's history it shares; its own
    # events are numbered after that seq. RESTRICT: the parent's events are the fork's
    # history, so a session with forks cannot be deleted (delete its forks first).
    db.execute("ALTER TABLE sessions ADD COLUMN parent TEXT REFERENCES sessions(id) ON DELETE RESTRICT")
    db.execute("ALTER TABLE sessions ADD COLUMN forked_at INTEGER")
    db.execute("CREATE INDEX sessions_parent ON sessions(parent)")


def _m003_blobs(db: sqlite3.Connection) -> None:
    # A text (UTF-8, zlib-compressed when smaller) by its SHA-256; and which events refer
    # to which texts, so that what nothing refers to can be found (seq 0: not an event,
    # the session's own record, such as its snapshot).
    db.execute(
        """CREATE TABLE blobs (
            hash BLOB PRIMARY KEY,
            size INTEGER NOT NULL,
            zlib INTEGER NOT NULL,
            data BLOB NOT NULL
        )"""
    )
    db.execute(
        """CREATE TABLE blob_refs (
            session TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            hash BLOB NOT NULL REFERENCES blobs(hash),
            PRIMARY KEY (session, seq, hash)
        ) WITHOUT ROWID"""
    )
    db.execute("CREATE INDEX blob_refs_hash ON blob_refs(hash)")


def _m004_snapshots(db: sqlite3.Connection) -> None:
    # A session's state as of seq, as plain data (see roost.loop.snapshot), msgpack
    # zlib-compressed, for the code whose snapshots are of that format; its long texts are
    # blobs (blob_refs seq 0).
    db.execute(
        """CREATE TABLE snapshots (
            session TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            format TEXT NOT NULL,
            body BLOB NOT NULL
        )"""
    )


def _m005_schedules(db: sqlite3.Connection) -> None:
    # Tasks the daemon runs by itself, on a cron schedule in a time zone (see
    # roost.daemon.schedules): what each runs, when it is next due, how its last run went.
    db.execute(
        """CREATE TABLE schedules (
            name TEXT PRIMARY KEY,
            cron TEXT NOT NULL,
            tz TEXT NOT NULL,
            task TEXT NOT NULL,
            cwd TEXT NOT NULL,
            agent TEXT,
            model TEXT,
            mode TEXT NOT NULL,
            missed TEXT NOT NULL,
            paused INTEGER NOT NULL DEFAULT 0,
            created REAL NOT NULL,
            next_due REAL NOT NULL,
            runs INTEGER NOT NULL DEFAULT 0,
            last_run REAL,
            last_session TEXT,
            last_run_id TEXT,
            last_error TEXT
        )"""
    )


MIGRATIONS: list[tuple[str, Callable[[sqlite3.Connection], None]]] = [
    ("m001_initial", _m001_initial),
    ("m002_forks", _m002_forks),
    ("m003_blobs", _m003_blobs),
    ("m004_snapshots", _m004_snapshots),
    ("m005_schedules", _m005_schedules),
]


def make_private(path: Path) -> None:
    """Create ``path`` 0600 if it is missing, and tighten its ``-wal`` and ``-shm`` files.

    Raises:
        NotPrivate: ``path`` is a symbolic link.
    """
    # Made 0600 before SQLite opens it, because SQLite creates the -wal and -shm files with
    # the database's mode. Ones left by a killed daemon are tightened too.
    os.close(private_opener(os.fspath(path), os.O_RDWR | os.O_CREAT))
    for leftover in (f"{path}-wal", f"{path}-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.close(private_opener(leftover, os.O_RDWR))


def connect(path: Path) -> sqlite3.Connection:
    """A connection to the database at ``path``, set up as every one of the store's is."""
    # Autocommit mode: transactions are explicit (see transaction), DDL included.
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA foreign_keys=ON")
    db.execute("PRAGMA busy_timeout=5000")
    # No commit checkpoints: the store's own checkpointer does, beside the writer.
    db.execute("PRAGMA wal_autocheckpoint=0")
    return db


def migrate(db: sqlite3.Connection) -> None:
    """Apply the :data:`MIGRATIONS` not applied yet, in order, each in its transaction."""
    db.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied REAL)")
    done = {name for (name,) in db.execute("SELECT name FROM _migrations")}
    for name, migration in MIGRATIONS:
        if name in done:
            continue
        with transaction(db):
            migration(db)
            db.execute("INSERT INTO _migrations VALUES (?, julianday('now'))", (name,))


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[None]:
    """A write transaction on ``db``: committed if the block ends, rolled back if it raises."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        # SQLite may have rolled back already (a full disk at COMMIT does): roll back only
        # what is still open, and let the first error be the one reported.
        if db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
        raise


#: SQL: when the session ``s`` last did something: its last event's time, else its creation.
LAST_ACTIVE = "coalesce((SELECT ts FROM events e WHERE e.session = s.id ORDER BY seq DESC LIMIT 1), s.created)"
