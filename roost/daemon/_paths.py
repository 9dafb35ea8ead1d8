"""Where the daemon keeps its files: socket and lock, database, log."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import platformdirs

from roost.protocol import default_socket_path

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
    """Create ``path`` (mode 0700) if needed and refuse one owned by someone else.

    Raises:
        PermissionError: the folder belongs to another user or others may write to it.
    """
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.stat()
    if info.st_uid != os.getuid():
        raise PermissionError(f"{path} belongs to uid {info.st_uid}, not to us")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise PermissionError(f"{path} is writable by other users; fix its mode (chmod 700)")
