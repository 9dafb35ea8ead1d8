"""The ``edit`` tool: exact string replacement in one file, written atomically.

The old string must appear exactly once, unless ``replace_all`` says to replace every
occurrence; a missing or ambiguous old string is an error, never a guess. Bytes that are
not UTF-8 survive an edit unchanged (they are carried as surrogate escapes). Paths that
resolve outside the working directory are refused.

An edit reads the whole file, so it takes regular files of at most :data:`EDIT_LIMIT`
bytes, opened without blocking: a larger file, a FIFO or a device is an error result. The
file's folder is opened once, at the real path that was judged and following no link; the
file is read, written and renamed within that folder's descriptor, so a folder swapped for
a symlink meanwhile is refused, never followed (``_fs``).
"""

from __future__ import annotations

import errno
import os
from functools import partial
from pathlib import Path
from typing import Any, Mapping

from ..folder._files import FileRefused, read_bounded
from ._base import Tool, ToolContext, ToolResult, locate, truncate
from ._fs import open_folder, open_path, write_at
from ._diffs import unified

_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1, "description": "file path, relative to the working directory"},
        "old": {"type": "string", "description": "the exact text to replace"},
        "new": {"type": "string", "description": "the text to put in its place"},
        "replace_all": {
            "type": "boolean",
            "description": "replace every occurrence (default: old must appear exactly once)",
        },
    },
    "required": ["path", "old", "new"],
    "additionalProperties": False,
}

#: Lines shown before and after the first change.
_CONTEXT_LINES = 3
#: The largest file edit reads (whole: it is searched, changed and written back).
EDIT_LIMIT = 8 << 20


class _EditFailed(Exception):
    """An edit that cannot be made; the message is for the model."""


def _edit(path: Path, name: str, old: str, new: str, replace_all: bool) -> tuple[int, bytes, str, str | None]:
    """Make the edit (blocking); return the count, the new bytes, the lines around it and
    the diff it made."""
    if not path.name:
        raise _EditFailed(f"{name} is a directory, not a file")
    try:
        folder = open_folder(str(path.parent))
    except FileNotFoundError:
        raise _EditFailed(f"no such file: {name}") from None
    try:
        return _edit_in(folder, path.name, name, old, new, replace_all)
    finally:
        os.close(folder)


def _edit_in(folder: int, leaf: str, name: str, old: str, new: str, replace_all: bool) -> tuple[int, bytes, str, str | None]:
    try:
        raw = read_bounded(leaf, EDIT_LIMIT, opener=partial(open_path, dir_fd=folder))
        text = raw.decode("utf-8", errors="surrogateescape")
    except FileNotFoundError:
        raise _EditFailed(f"no such file: {name}") from None
    except IsADirectoryError:
        raise _EditFailed(f"{name} is a directory, not a file") from None
    except FileRefused as exc:
        if exc.errno == errno.EFBIG:
            raise _EditFailed(
                f"{name} is larger than {EDIT_LIMIT >> 20} MiB, more than edit reads; change it with "
                "bash (sed, a script)"
            ) from None
        raise _EditFailed(f"cannot edit {name}: {exc.strerror}") from None
    count = text.count(old)
    if count == 0:
        raise _EditFailed(f"old string not found in {name}")
    if count > 1 and not replace_all:
        raise _EditFailed(f"old string appears {count} times in {name}; give more context or replace_all")
    first = text.index(old)
    changed = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    try:
        data = changed.encode("utf-8", errors="surrogateescape")
    except UnicodeEncodeError as exc:
        raise _EditFailed(f"the new string is not valid text ({exc.reason})") from None
    write_at(folder, leaf, data)
    return count, data, _context(changed, first, first + len(new)), unified(text, changed, name)


def _context(text: str, start: int, end: int) -> str:
    """The lines holding ``text[start:end]`` and a few around them, numbered as ``read`` does."""
    lines = text.splitlines()
    # The line a position is on: count the lines before it (splitlines, as read counts).
    first, last = (len((text[:at] + "x").splitlines()) - 1 for at in (start, end))
    low, high = max(0, first - _CONTEXT_LINES), min(len(lines), last + _CONTEXT_LINES + 1)
    width = len(str(high))
    return "\n".join(f"{n + 1:>{width}}\t{_shown(lines[n])}" for n in range(low, high))


def _shown(line: str) -> str:
    # Bytes that are not UTF-8 are kept in the file, but shown as U+FFFD.
    return line.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")


async def _run_edit(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    name, old, new = input["path"], input["old"], input["new"]
    located = locate(ctx, name)
    if isinstance(located, ToolResult):
        return located
    path, _ = located
    if old == "":
        return ToolResult(
            "old is empty; give the exact text to replace (to write a whole file, use write)", is_error=True
        )
    if old == new:
        return ToolResult("old and new are the same; nothing to change", is_error=True)
    try:
        count, data, around, diff = await ctx.in_thread(_edit, path, name, old, new, bool(input.get("replace_all", False)))
    except _EditFailed as exc:
        return ToolResult(str(exc), is_error=True)
    except OSError as exc:
        return ToolResult(f"cannot edit {name}: {exc.strerror or exc}", is_error=True)
    plural = "occurrence" if count == 1 else "occurrences"
    text = f"replaced {count} {plural} in {name}\n{around}"
    meta: dict[str, Any] = {"bytes": len(data), "replacements": count, **({"diff": diff} if diff else {})}
    return ToolResult(truncate(text, ctx.output_limit), meta=meta)


EDIT = Tool(
    "edit",
    "Replace exact text in a file. old must match the file character for character "
    "(whitespace and indentation included) and appear exactly once, unless replace_all is "
    "true; include surrounding lines to make it unique. The path must stay inside the "
    "working directory.",
    _SCHEMA,
    _run_edit,
)
