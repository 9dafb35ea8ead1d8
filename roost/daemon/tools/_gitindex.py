"""Reading a git index (``$GIT_DIR/index``) as data: the paths it tracks, and how.

What is read (git's ``gitformat-index``): the header (``DIRC``, versions 2, 3 and 4), every
entry's mode, flags (with version 3's extended flags) and path (version 4's paths share
their start with the entry before), and the extensions by name: ``link`` (a split index:
the entries are changes to a shared index ``sharedindex.<hash>`` beside it, read and
merged as git merges them), ``sdir`` (a sparse index: some entries are whole folders,
mode 040000), the optional ones (``TREE``, ``UNTR``, ``FSMN``, ``EOIE``, … — a capital
first letter) skipped. An entry that is a conflict has one entry per side: its path is
there once. The trailing checksum is not verified (git skips it too unless asked).

Error handling: an index this reader cannot take whole (a version or a required
extension it does not know, a size over :data:`INDEX_LIMIT`, anything cut short or
inconsistent) raises :class:`UnreadableIndex` saying why; nothing is guessed. A missing
index is an empty one (a repository before its first ``git add``).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

from ..folder._files import FileRefused, read_bounded

#: Bytes an index (or the shared index of a split one) may have: about a million files.
INDEX_LIMIT = 128 << 20

#: The kinds of entries, by the type bits of their mode.
MODE_TYPE = 0o170000
GITLINK = 0o160000
DIRECTORY = 0o040000

_HEADER = struct.Struct(">4sII")
_EXTENDED = 0x4000


class UnreadableIndex(Exception):
    """An index this reader cannot take whole; the message says why."""


@dataclass(frozen=True, slots=True)
class Index:
    """What an index tracks: each path (bytes, relative to the work tree's top) with the
    type bits of its mode (:data:`GITLINK`, :data:`DIRECTORY` for a sparse index's
    folders, else a file or a symlink)."""

    paths: dict[bytes, int]


def read_index(git_dir: Path, hash_size: int) -> Index:
    """The index of the repository whose (per work tree) git folder is ``git_dir``, whose
    object names are ``hash_size`` bytes (20: SHA-1, 32: SHA-256).

    Blocking: run it in a worker thread.

    Raises:
        UnreadableIndex: see the module docstring.
    """
    data = _read(git_dir / "index")
    if data is None:
        return Index({})
    entries, link = _parse(data, hash_size, "index")
    if link is None or not any(link[:hash_size]):
        return Index({path: mode for path, mode in entries})
    return Index(_merge_split(git_dir, entries, link, hash_size))


def _read(path: Path) -> bytes | None:
    try:
        return read_bounded(path, INDEX_LIMIT)
    except FileNotFoundError:
        return None
    except FileRefused as exc:
        raise UnreadableIndex(str(exc)) from None
    except OSError as exc:
        raise UnreadableIndex(f"{path} cannot be read: {exc.strerror or exc}") from None


def _parse(data: bytes, hash_size: int, name: str) -> tuple[list[tuple[bytes, int]], bytes | None]:
    """The entries of an index file's bytes as ``(path, mode type)`` in order, and the
    data of its ``link`` extension (None: not a split index)."""
    if len(data) < _HEADER.size + hash_size:
        raise UnreadableIndex(f"the {name} is cut short")
    signature, version, count = _HEADER.unpack_from(data)
    if signature != b"DIRC":
        raise UnreadableIndex(f"the {name} is not a git index")
    if version not in (2, 3, 4):
        raise UnreadableIndex(f"the {name} has version {version}, which roost does not read")
    end = len(data) - hash_size
    # An entry's mode (after ctime, mtime, dev, ino), then its flags (after uid, gid, size
    # and the object name).
    fixed = struct.Struct(f">24xI{12 + hash_size}xH")
    entries: list[tuple[bytes, int]] = []
    offset, previous = _HEADER.size, b""
    try:
        for _ in range(count):
            mode, flags = fixed.unpack_from(data, offset)
            at = offset + fixed.size + (2 if flags & _EXTENDED else 0)
            if version == 4:
                cut, at = _varint(data, at)
                if cut > len(previous):
                    raise UnreadableIndex(f"the {name} has an entry whose path cannot be rebuilt")
                nul = data.index(0, at, end)
                path = previous[: len(previous) - cut] + data[at:nul]
                offset, previous = nul + 1, path
            else:
                nul = data.index(0, at, end)
                path = data[at:nul]
                # Entries are padded with NULs to a multiple of 8 bytes (1 to 8 of them).
                offset += (at - offset + len(path) + 8) & ~7
            if offset > end:
                raise UnreadableIndex(f"the {name} is cut short")
            entries.append((path, mode & MODE_TYPE))
    except (ValueError, IndexError, struct.error):  # no NUL before the end, a varint past it
        raise UnreadableIndex(f"the {name} is cut short") from None
    link = None
    while offset + 8 <= end:
        signature, size = struct.unpack_from(">4sI", data, offset)
        body = data[offset + 8 : offset + 8 + size]
        if len(body) != size:
            raise UnreadableIndex(f"the {name} has an extension cut short")
        if signature == b"link":
            link = body
        elif signature == b"sdir" or b"A"[0] <= signature[0] <= b"Z"[0]:
            pass  # a sparse index shows in its folder entries; optional ones change nothing
        else:
            shown = signature.decode("ascii", "replace")
            raise UnreadableIndex(f"the {name} has an extension roost does not read ({shown!r})")
        offset += 8 + size
    return entries, link


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """git's offset varint at ``data[at]``: its value and the index after it."""
    byte = data[at]
    value = byte & 0x7F
    for _ in range(9):
        if not byte & 0x80:
            return value, at + 1
        at += 1
        byte = data[at]
        value = ((value + 1) << 7) | (byte & 0x7F)
    raise UnreadableIndex("the index has a path length that does not fit")


def _merge_split(git_dir: Path, changes: list[tuple[bytes, int]], link: bytes, hash_size: int) -> dict[bytes, int]:
    """The paths of a split index: the shared index's, less those the ``link`` extension
    deletes, each it replaces given its new mode, plus the entries added."""
    name = link[:hash_size].hex()
    shared_data = _read(git_dir / f"sharedindex.{name}")
    if shared_data is None:
        raise UnreadableIndex(f"the shared index sharedindex.{name} of a split index is missing")
    if shared_data[-hash_size:] != link[:hash_size]:
        raise UnreadableIndex(f"sharedindex.{name} is not the shared index it names")
    base, base_link = _parse(shared_data, hash_size, f"sharedindex.{name}")
    if base_link is not None:
        raise UnreadableIndex(f"sharedindex.{name} is itself split")
    at = hash_size
    deleted, at = _ewah_bits(link, at, len(base))
    replaced, at = _ewah_bits(link, at, len(base))
    if len(replaced) > len(changes) or any(path for path, _ in changes[: len(replaced)]):
        raise UnreadableIndex("the split index does not match its shared index")
    merged = list(base)
    for position, (_, mode) in zip(sorted(replaced), changes):
        merged[position] = (merged[position][0], mode)
    paths = {path: mode for position, (path, mode) in enumerate(merged) if position not in deleted}
    for path, mode in changes[len(replaced) :]:
        if not path:
            raise UnreadableIndex("the split index adds an entry without a path")
        paths[path] = mode
    return paths


def _ewah_bits(data: bytes, at: int, limit: int) -> tuple[set[int], int]:
    """The positions set in the EWAH bitmap at ``data[at]`` (each under ``limit``), and
    the index after it; no bitmap there (the extension ends) is an empty one."""
    if at == len(data):
        return set(), at
    try:
        _, words = struct.unpack_from(">II", data, at)
        buffer = struct.unpack_from(f">{words}Q", data, at + 8)
    except struct.error:
        raise UnreadableIndex("the split index's bitmap is cut short") from None
    at += 8 + 8 * words + 4
    if at > len(data):
        raise UnreadableIndex("the split index's bitmap is cut short")
    bits: set[int] = set()
    position, word = 0, 0
    while word < len(buffer):
        marker = buffer[word]
        word += 1
        run = ((marker >> 1) & 0xFFFFFFFF) * 64
        if marker & 1:
            if position + run > limit:
                raise UnreadableIndex("the split index's bitmap names entries its shared index lacks")
            bits.update(range(position, position + run))
        position += run
        for _ in range(marker >> 33):
            if word >= len(buffer):
                raise UnreadableIndex("the split index's bitmap is cut short")
            literal = buffer[word]
            word += 1
            while literal:
                low = literal & -literal
                bits.add(position + low.bit_length() - 1)
                literal ^= low
            position += 64
    if any(bit >= limit for bit in bits):
        raise UnreadableIndex("the split index's bitmap names entries its shared index lacks")
    return bits, at
