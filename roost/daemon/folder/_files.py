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
from pathlib import Path
from typing import Callable

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


def _read(path: str | os.PathLike[str], limit: int, within: Path | None, opener: Opener) -> bytes:
    if within is not None:
        # Most files looked for are not there: a stat says so for less than two realpaths.
        os.stat(path)
        real = os.path.realpath(path)
        if not Path(real).is_relative_to(os.path.realpath(within)):
            raise FileRefused(errno.EACCES, f"{path} leads outside {within} (to {real}); it is not read")
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
