"""Where the daemon keeps its files (socket and lock, database, log), and keeping them private.

Everything the daemon writes is 0600 in 0700 folders, set when the file or folder is made
(never through the umask, which tool processes inherit).
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from roost.protocol import NotPrivate, check_private_dir, default_socket_path

_APP = "roost"


def state_dir() -> Path:
    """The user state dir (``~/.local/state/roost``): the database lives here."""
    return Path(platformdirs.user_state_dir(_APP, appauthor=False))


def log_dir() -> Path:
    """The user log dir: ``roostd.log`` lives here."""
    return Path(platformdirs.user_log_dir(_APP, appauthor=False))


def socket_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The socket to listen on: ``explicit``, else the protocol's default."""
    return Path(explicit if explicit is not None else default_socket_path())


def ensure_private_dir(path: Path) -> None:
    """Make ``path`` a folder only we can use: created 0700 (missing parents too), or, when
    it exists, checked and tightened to 0700 if others may read it.

    For the daemon's own folders only (state, log, ledger): a folder the user named (the
    socket's, an explicit database's) is checked, never changed.

    Raises:
        NotPrivate: a symbolic link, not a folder, another user's, or writable by others.
    """
    check_private_dir(os.fspath(path))
    # Through a descriptor, so that what is tightened is what was checked, never a link.
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o700)
    finally:
        os.close(fd)


def private_opener(path: str, flags: int) -> int:
    """An ``opener`` for :func:`open` that keeps the file to us: created 0600, an existing
    one tightened to 0600, and a symbolic link refused (:class:`NotPrivate`), never followed.

    Independent of the umask, which the daemon leaves alone: the tools it starts must
    create the user's files with the user's usual modes.
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW, 0o600)
    except OSError:
        if os.path.islink(path):
            raise NotPrivate(f"{path} is a symbolic link; roost does not write through one: remove it") from None
        raise
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
    except BaseException:
        os.close(fd)
        raise
    return fd
