"""Reading files on a project's behalf: regular files only, bounded, never blocking.

A project's files are written by whoever wrote the repository. Anything the daemon reads
because a project names it (config, agents, skills, instructions, memory, scripted models)
goes through here, so that no file can freeze the daemon (a FIFO, a device) or bloat it (a
huge or endless file): the file is opened without blocking, must be a regular file, and at
most ``limit`` bytes are read. Callers run these functions in a worker thread. The tools
open the files a model names with :func:`open_regular` for the same reasons.

Error handling: every refusal is a :class:`FileRefused` (an ``OSError``) whose message names
the file and the reason; a missing file is the usual ``FileNotFoundError``.
"""

from __future__ import annotations

import errno
import os
import stat
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Callable, Iterator

#: What opens a file: ``os.open`` or one with its own rules (``open(2)``'s path and flags).
Opener = Callable[[str, int], int]

#: Bytes a config, agent or script file may have.
CONFIG_LIMIT = 1 << 20


class FileRefused(OSError):
    """A file that is not read: not a regular file, too large, or outside its folder."""


def read_bounded(
    path: str | os.PathLike[str], limit: int = CONFIG_LIMIT, *, within: Path | None = None, opener: Opener = os.open
) -> bytes:
    """The whole content of a regular file of at most ``limit`` bytes.

    ``within``: the file must really be inside this folder (symlinks followed).
    ``opener``: opens ``path`` (see :func:`open_regular`).

    Raises:
        FileNotFoundError: no such file.
        FileRefused: not a regular file, larger than ``limit``, or outside ``within``.
    """
    data = _read(path, limit + 1, within, opener)
    if len(data) > limit:
        raise FileRefused(errno.EFBIG, f"{path} is larger than {_size(limit)}; it is not read")
    return data


def read_head(path: str | os.PathLike[str], limit: int, *, within: Path | None = None) -> bytes:
    """At most the first ``limit`` bytes of a regular file (a longer file is cut).

    Raises:
        FileNotFoundError: no such file.
        FileRefused: not a regular file, or outside ``within``.
    """
    return _read(path, limit, within, os.open)


def open_regular(path: str | os.PathLike[str], *, opener: Opener = os.open) -> int:
    """A read-only descriptor on the regular file ``path``, opened without waiting.

    ``opener`` opens it (the file tools' opens follow no link; see ``tools._fs``). The
    caller owns the descriptor and closes it.

    Raises:
        FileNotFoundError: no such file.
        IsADirectoryError: a folder.
        FileRefused: anything else that is not a regular file (a FIFO, a device, a socket).
    """
    # O_NONBLOCK: opening a FIFO with no writer would otherwise wait for ever. It changes
    # nothing for a regular file's reads; the rest is refused before it is read.
    fd = opener(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, f"{path} is a directory, not a file")
        if not stat.S_ISREG(mode):
            raise FileRefused(errno.EINVAL, f"{path} is not a regular file ({_kind(mode)}); it is not read")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a file"


@contextmanager
def one_pass() -> Iterator[None]:
    """Within it, each file is opened once: what was read is kept and served again.

    For what is read together (a folder's setup, a run's prompt): parts that need the same
    file (the project's config for its settings and its MCP servers, git's ``HEAD`` for the
    file list and the branch) get one reading of it. A read that must stay ``within`` a
    folder is checked where the path leads now, and served only what was read from there.
    Scoped to the calling context and undone on exit, so no later reading sees old bytes.
    """
    token = _PASS.set({})
    try:
        yield
    finally:
        _PASS.reset(token)


#: What :func:`one_pass` keeps, by path: the bytes read (None: no such file), the limit
#: they were read with, and where the path led.
_PASS: ContextVar[dict[str, tuple[bytes | None, int, str]] | None] = ContextVar("roost_file_pass", default=None)


def _read(path: str | os.PathLike[str], limit: int, within: Path | None, opener: Opener) -> bytes:
    real = None
    if within is not None:
        # Most files looked for are not there: a stat says so for less than two realpaths.
        os.stat(path)
        real = os.path.realpath(path)
        if not Path(real).is_relative_to(os.path.realpath(within)):
            raise FileRefused(errno.EACCES, f"{path} leads outside {within} (to {real}); it is not read")
    kept = _PASS.get() if opener is os.open else None
    key = os.fspath(path)
    if kept is not None and key in kept:
        data, read, led = kept[key]
        if data is None:
            raise FileNotFoundError(errno.ENOENT, f"{path}: no such file")
        if (len(data) < read or limit <= read) and (real is None or real == led):
            return data[:limit]
    try:
        data = _read_fd(path, limit, opener)
    except FileNotFoundError:
        if kept is not None:
            kept[key] = (None, limit, "")
        raise
    if kept is not None:
        kept[key] = (data, limit, real if real is not None else os.path.realpath(path))
    return data


def _read_fd(path: str | os.PathLike[str], limit: int, opener: Opener) -> bytes:
    fd = open_regular(path, opener=opener)
    try:
        chunks, size = [], 0
        while size < limit:
            chunk = os.read(fd, min(limit - size, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"
