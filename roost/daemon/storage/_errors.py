"""What SQLite and the file system report about the database, translated here, once.

Error handling::

    StoreError        the database cannot do what was asked (the message names the file)
    ├── StoreFull     the disk (or quota) holding it is full
    └── StoreDamaged  the file is not a database, or is malformed

A damaged file is not repaired: :func:`set_aside` moves it (with its ``-wal`` and ``-shm``)
out of the way whole, so that a new database can be made and the old one recovered by hand.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import time
from pathlib import Path

#: Free bytes under which an I/O error of SQLite is taken for a full disk (SQLite reports
#: some writes that found no room, such as growing the -shm file, as I/O errors).
_NEARLY_FULL = 1 << 20


class StoreError(Exception):
    """The database cannot do what was asked; the message says why, naming the file."""

    def __init__(self, path: Path, message: str) -> None:
        super().__init__(message)
        self.path = path


class StoreFull(StoreError):
    """The disk (or the quota) holding the database is full: nothing was stored."""


class StoreDamaged(StoreError):
    """The database file is not a database, or is malformed."""


def store_error(exc: sqlite3.Error | OSError, path: Path) -> StoreError:
    """What SQLite or the file system said, as a :class:`StoreError` about ``path``."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    detail = str(exc) if isinstance(exc, sqlite3.Error) else (exc.strerror or str(exc))
    full = (isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)) or primary == sqlite3.SQLITE_FULL
    if full or (primary == sqlite3.SQLITE_IOERR and _nearly_full(path)):
        return StoreFull(path, f"the disk holding the database {path} is full ({detail}); free some space there")
    if primary in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return StoreDamaged(path, f"the database {path} is damaged ({detail})")
    return StoreError(path, f"the database {path} cannot be used ({detail})")


def _nearly_full(path: Path) -> bool:
    try:
        info = os.statvfs(path.parent)
    except OSError:
        return False
    return info.f_bavail * info.f_frsize < _NEARLY_FULL


def set_aside(path: Path) -> Path:
    """Move the damaged database ``path`` (and its ``-wal`` and ``-shm`` files) aside, to
    ``<name>.corrupt-<time>``, never over an existing file; return where it went."""
    stamp = time.strftime("%Y%m%dT%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while any(os.path.lexists(f"{aside}{suffix}") for suffix in ("", "-wal", "-shm")):
        n += 1
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.rename(f"{path}{suffix}", f"{aside}{suffix}")
    return aside
