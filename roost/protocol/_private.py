"""Keeping other local users out: private folders, and who serves a socket.

Design: whoever can write to the socket's folder can plant a fake socket there, or a
symbolic link where a client writes a file. So before a client connects to a socket or
creates anything next to it, the folder must be a real folder (never a symlink: it is looked
at with ``lstat``), ours, and not writable by group or others; a missing one is created with
mode 0700, and looked at again afterwards (another user may have won the race). Once
connected, the process at the other end must run as us too (``SO_PEERCRED``; where the
system does not tell, the private folder is the guard). The daemon applies the same check
to its own folders.

Stdlib only, and ``pwd`` only on the error path: the CLI runs this on every command.
"""

from __future__ import annotations

import _socket
import os
import stat
import struct
from typing import Protocol

from ._errors import NotPrivate

#: ``struct ucred`` of Linux: pid, uid, gid.
_UCRED = struct.Struct("iII")


class Sockopts(Protocol):
    """A connected socket: the stdlib's, or a trio or asyncio wrapper of one."""

    def getsockopt(self, level: int, option: int, buflen: int, /) -> bytes: ...


def check_private_dir(path: str, *, create: bool = True) -> bool:
    """Check that ``path`` is a folder only we can change; with ``create``, make it if missing.

    A missing folder (and any missing parent) is created with mode 0700, as the XDG spec
    asks. An existing folder is left as it is: it is checked, never changed.

    Returns:
        True when the folder is fine; False when it does not exist (and ``create`` is false).

    Raises:
        NotPrivate: ``path`` is a symbolic link, not a folder, another user's, or writable
            by group or others.
    """
    if create:
        _make_dirs(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    problem = _problem(path, info)
    if problem:
        raise NotPrivate(problem)
    return True


def peer_credentials(sock: Sockopts) -> tuple[int, int] | None:
    """The pid and uid of the process at the other end of a connected Unix socket.

    For a client's socket, that is the process that called ``listen``. None where the
    system does not tell (``SO_PEERCRED`` is Linux's).
    """
    # _socket, not socket: see connect_unix.
    option = getattr(_socket, "SO_PEERCRED", None)
    if option is None:
        return None
    pid, uid, _gid = _UCRED.unpack(sock.getsockopt(_socket.SOL_SOCKET, option, _UCRED.size))
    return pid, uid


def check_peer(sock: Sockopts, path: str) -> None:
    """Refuse a socket that a process of another user serves.

    Raises:
        NotPrivate: the process that listens on ``path`` runs as another user.
    """
    credentials = peer_credentials(sock)
    if credentials is None:
        return
    pid, uid = credentials
    if uid != os.getuid():
        raise NotPrivate(
            f"a process of {_user(uid)} serves {path} (pid {pid}); it is not your roost "
            "daemon. Remove that socket, or use another (ROOST_SOCKET)"
        )


def _user(uid: int) -> str:
    """``user NAME (uid N)``, or ``uid N`` for a uid with no name."""
    import pwd  # only for error messages

    try:
        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _make_dirs(path: str) -> None:
    # os.makedirs would give missing parents the default mode; and mkdir never follows a
    # symlink in the last place: an existing one is reported by the lstat that follows.
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:
        parent = os.path.dirname(os.path.normpath(path))
        if not parent or parent == path:
            raise
        _make_dirs(parent)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass


def _problem(path: str, info: os.stat_result) -> str | None:
    if stat.S_ISLNK(info.st_mode):
        return f"{path} is a symbolic link, not a folder (someone may have planted it): remove it"
    if not stat.S_ISDIR(info.st_mode):
        return f"{path} is not a folder: move it away"
    if info.st_uid != os.getuid():
        return (
            f"{path} belongs to {_user(info.st_uid)}, not to you (uid {os.getuid()}), so another "
            "user may have made it to pose as roost: have it removed (by its owner or root)"
        )
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (
            f"{path} can be written by other users (mode {stat.S_IMODE(info.st_mode):04o}): make "
            f"sure nothing in it was planted, then make it private (chmod 700 {path})"
        )
    return None
