"""How the file tools reach files: a path is resolved once, judged, then opened without
following any link, so that what was judged is what is read or written.

The race this closes: a tool resolved a path (symlinks followed), the permission policy
judged the real path, and the tool later opened the *name* again. Anything that swapped a
file or a folder on it for a symlink in between (a command running beside the call, in the
sandbox or not) had the tool read or write where it was never allowed. Here:

- :func:`resolve` follows the links a path names (the call asked to follow those; what it
  returns is judged), and refuses a path that reaches ``/proc``, ``/sys`` or ``/dev`` by any
  spelling: the daemon's own environment and descriptors, devices, kernel settings.
- :func:`open_path` opens a resolved path, which has no link left in it, following no link
  at all: ``openat2`` with ``RESOLVE_NO_SYMLINKS`` (and ``RESOLVE_BENEATH`` below a folder's
  descriptor) where the kernel has it; elsewhere one ``O_NOFOLLOW`` open per component from
  a folder's descriptor. A link found there now was put there since: :class:`PathSwapped`.
- :func:`real_paths` finds where the names a listing gave lead, each looked at in its
  folder's descriptor.
- :func:`write_at` writes a temporary file in the parent folder's descriptor and renames it
  into place within that descriptor; :func:`open_folder` gets that descriptor (making
  missing folders one at a time, each opened the same way).

Error handling: a path in a kernel folder is refused with :class:`KernelPath`, a link met
where the resolution found none with :class:`PathSwapped` (both :class:`FileRefused`, an
``OSError``); the rest are the ``OSError`` the system calls raise.
"""

from __future__ import annotations

import ctypes
import errno
import os
import secrets
import stat
import sys
from contextlib import suppress
from typing import Callable, Iterable, Iterator

from ..folder._files import FileRefused

#: Top-level folders whose files are the kernel's: never read or written by the file tools.
KERNEL_FOLDERS = ("/proc", "/sys", "/dev")

#: Links followed in one resolution at most (the kernel's own limit, MAXSYMLINKS).
_MAX_LINKS = 40
#: A folder opened only to open what is in it (no read permission needed on it).
_FOLDER = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC

_SYS_OPENAT2 = 437  # in the table most Linux architectures share
#: Architectures whose system calls are numbered otherwise: they get the walk.
_OTHER_NUMBERS = ("alpha", "mips", "ia64")
_AT_FDCWD = -100
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08


class KernelPath(FileRefused):
    """A path that leads into ``/proc``, ``/sys`` or ``/dev``, which the file tools refuse."""

    def __init__(self, path: str, folder: str) -> None:
        super().__init__(errno.EACCES, f"{path} leads into {folder}: the file tools do not touch /proc, /sys or /dev")


class PathSwapped(FileRefused):
    """A symlink found on a resolved path: something put it there since it was resolved."""

    def __init__(self, path: str) -> None:
        super().__init__(
            errno.ELOOP,
            f"{path} changed while the call ran: a symlink now stands on its path, where none was when it "
            "was resolved; it is not followed",
        )


def resolve(path: str, cwd: str = "/") -> str:
    """Where ``path`` (absolute, or relative to the folder ``cwd``) really leads: ``.``,
    ``..``, ``//`` and every symlink followed, as ``os.path.realpath`` does (a missing part
    is kept as named), blocking.

    Raises:
        KernelPath: the path, or a link on the way, goes through ``/proc``, ``/sys`` or
            ``/dev`` (``/proc/self/environ``, ``/dev/fd/3``, a link to either).
        OSError: more than 40 links (``ELOOP``).
    """
    named = path if path.startswith("/") else f"{cwd}/{path}"
    pending = named.split("/")[::-1]  # what is left to walk, its next part last
    parts: list[str] = []  # the real path so far, without links
    links = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        here = "/" + "/".join([*parts, part])
        if not parts and here in KERNEL_FOLDERS:
            raise KernelPath(path, here)
        try:
            link = stat.S_ISLNK(os.lstat(here).st_mode)
            target = os.readlink(here) if link else ""
        except OSError:
            link = False  # missing, or swapped back to a file since the lstat: taken as named
        if not link:
            parts.append(part)
            continue
        links += 1
        if links > _MAX_LINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
        if target.startswith("/"):
            parts = []
        pending += target.split("/")[::-1]
    return "/" + "/".join(parts)


def real_paths(root: str, names: Iterable[str]) -> Iterator[tuple[str, str]]:
    """Each of ``names`` (paths relative to the real folder ``root``, as a listing found
    them) that is there now, with its real path (blocking).

    Each folder is resolved once, ``root`` too (swapped for a link since the listing, its
    files are where it leads now), and opened following no link; a file is looked at in
    its folder's descriptor, so that a folder swapped meanwhile cannot pass the files of
    another off as its own, and resolved only when it is a link. Left out: names that are
    gone, in a folder swapped since it was resolved, or that lead into ``/proc``, ``/sys``
    or ``/dev`` or round a loop of links.
    """
    folders: dict[str, str | None] = {}
    current: tuple[str, int] | None = None  # the folder open now, and its descriptor
    try:
        for name in names:
            folder, _, leaf = name.rpartition("/")
            if folder not in folders:
                try:
                    folders[folder] = resolve(folder, root)
                except OSError:
                    folders[folder] = None
            real_folder = folders[folder]
            if real_folder is None:
                continue
            if current is None or current[0] != real_folder:
                if current is not None:
                    os.close(current[1])
                    current = None
                try:
                    current = (real_folder, open_folder(real_folder))
                except OSError:
                    folders[folder] = None  # gone, or swapped since it was resolved
                    continue
            path = os.path.join(real_folder, leaf)
            try:
                link = stat.S_ISLNK(os.stat(leaf, dir_fd=current[1], follow_symlinks=False).st_mode)
                real = resolve(path) if link else path
            except OSError:
                continue
            yield name, real
    finally:
        if current is not None:
            os.close(current[1])


def open_path(path: str, flags: int, mode: int = 0o666, *, dir_fd: int | None = None) -> int:
    """A descriptor on the resolved ``path``, opened following no link (blocking).

    ``path`` is absolute (walked from the root), or relative to the folder ``dir_fd`` and
    never leaving it; either way it has no ``.``, ``..`` or empty part, as :func:`resolve`
    returns it. ``O_CLOEXEC`` is added to ``flags``. The caller owns the descriptor.

    Raises:
        PathSwapped: a symlink stands on the path (it was put there since it was resolved).
        ValueError: ``path`` is not a resolved path, or relative without ``dir_fd``.
        OSError: as ``open(2)`` raises it (``FileNotFoundError``, ``NotADirectoryError``...).
    """
    absolute = path.startswith("/")
    parts = [] if path == "/" else path.removeprefix("/").split("/")
    if any(part in ("", ".", "..") for part in parts) or not (absolute or dir_fd is not None):
        raise ValueError(f"{path!r} is not a resolved path")
    start = None if absolute else dir_fd
    flags |= os.O_CLOEXEC
    try:
        if _openat2 is None:
            return _walk_open(parts, flags, mode, start)
        resolve = _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
        if start is None:
            return _openat2(_AT_FDCWD, os.fsencode(path), flags, mode, resolve)
        return _openat2(start, os.fsencode(path), flags, mode, resolve | _RESOLVE_BENEATH)
    except OSError as exc:
        # ELOOP: a link where the resolution found none. EXDEV: a way out of dir_fd.
        if exc.errno in (errno.ELOOP, errno.EXDEV):
            raise PathSwapped(path) from None
        raise


def open_folder(path: str, *, create: bool = False) -> int:
    """A descriptor on the resolved folder ``path``, opened as :func:`open_path` opens
    (blocking); with ``create``, missing folders are made first (``0o777`` less the umask),
    each opened the same way before the next is made in it.

    Raises:
        FileNotFoundError: the folder is missing (without ``create``).
        NotADirectoryError: a part of ``path`` is a file.
        PathSwapped: a symlink stands on the path.
    """
    try:
        return open_path(path, _FOLDER)
    except FileNotFoundError:
        if not create:
            raise
    fd = os.open("/", _FOLDER)
    try:
        for part in path.strip("/").split("/"):
            try:
                inner = open_path(part, _FOLDER, dir_fd=fd)
            except FileNotFoundError:
                with suppress(FileExistsError):  # made meanwhile: opened, and checked, below
                    os.mkdir(part, dir_fd=fd)
                inner = open_path(part, _FOLDER, dir_fd=fd)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_at(dir_fd: int, name: str, data: bytes) -> bool:
    """Replace the file ``name`` in the folder ``dir_fd`` with ``data`` in one step
    (blocking); whether the file is new.

    A reader sees the old file or the new one, never half of one: ``data`` goes to a
    temporary file beside it, which ``rename`` puts in place. An existing file keeps its
    permission bits; a new one gets ``0o666`` less the umask. The temporary file is removed
    if anything fails.

    Raises:
        IsADirectoryError: ``name`` is a folder.
        PathSwapped: ``name`` is a symlink (the resolved path had none).
    """
    try:
        now: os.stat_result | None = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        now = None
    if now is not None and stat.S_ISLNK(now.st_mode):
        raise PathSwapped(name)
    if now is not None and stat.S_ISDIR(now.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
    temp = f".{name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as file:
            if now is not None:
                os.fchmod(file.fileno(), stat.S_IMODE(now.st_mode))
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=dir_fd)
        raise
    return now is None


def write_atomic(path: str, data: bytes) -> bool:
    """Replace the file at the resolved ``path`` with ``data`` in one step, making its
    folders (blocking; see :func:`write_at` and :func:`open_folder`); whether it is new."""
    folder, _, name = path.rpartition("/")
    fd = open_folder(folder or "/", create=True)
    try:
        return write_at(fd, name, data)
    finally:
        os.close(fd)


def _walk_open(parts: list[str], flags: int, mode: int, dir_fd: int | None) -> int:
    """``parts`` opened one at a time from ``dir_fd`` (None: the root), none followed if
    a link: what stands in for openat2."""
    if not parts:
        return os.open("/", flags, mode)
    fd = os.open("/", _FOLDER) if dir_fd is None else dir_fd
    try:
        for part in parts[:-1]:
            inner = _nofollow(part, _FOLDER, 0, fd)
            if fd != dir_fd:
                os.close(fd)
            fd = inner
        return _nofollow(parts[-1], flags, mode, fd)
    finally:
        if fd != dir_fd:
            os.close(fd)


def _nofollow(name: str, flags: int, mode: int, dir_fd: int) -> int:
    try:
        return os.open(name, flags | os.O_NOFOLLOW, mode, dir_fd=dir_fd)
    except NotADirectoryError:
        # O_DIRECTORY on a link says ENOTDIR, as on a file. A file there now was a file
        # then; a link or a folder (a link swapped back since) was not.
        try:
            now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
            changed = stat.S_ISLNK(now) or stat.S_ISDIR(now)
        except OSError:
            changed = True  # gone since
        if changed:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), name) from None
        raise


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _load_openat2() -> Callable[[int, bytes, int, int, int], int] | None:
    """The ``openat2`` system call (Python has no wrapper), or None where the platform, the
    kernel (before 5.6) or a seccomp filter refuses it."""
    if not sys.platform.startswith("linux") or os.uname().machine.startswith(_OTHER_NUMBERS):
        return None
    try:
        syscall = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    syscall.restype = ctypes.c_long
    syscall.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.POINTER(_OpenHow), ctypes.c_size_t]

    def openat2(dir_fd: int, path: bytes, flags: int, mode: int, resolve: int) -> int:
        # The kernel refuses a mode without O_CREAT (or O_TMPFILE, which no tool uses).
        how = _OpenHow(flags, mode if flags & os.O_CREAT else 0, resolve)
        fd = syscall(_SYS_OPENAT2, dir_fd, path, ctypes.byref(how), ctypes.sizeof(how))
        if fd < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), os.fsdecode(path))
        return int(fd)

    try:
        os.close(openat2(_AT_FDCWD, b"/", _FOLDER, 0, _RESOLVE_NO_SYMLINKS))
    except OSError:
        return None  # ENOSYS (an old kernel), EPERM (a seccomp filter)
    return openat2


_openat2 = _load_openat2()
