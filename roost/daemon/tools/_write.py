"""The ``write`` tool: a whole file's content, written atomically.

A write goes to a temporary file in the target's folder, then ``os.replace`` puts it in
place, so a reader sees the old file or the new one, never half of one. Paths that resolve
(symlinks followed) outside the working directory are refused. The folder is opened at the
real path that was judged, following no link, and the file is written and renamed within
that folder's descriptor: a folder swapped for a symlink meanwhile is refused, never
written through (``_fs``).
"""

from __future__ import annotations

from typing import Any, Mapping

from ._base import Tool, ToolContext, ToolResult, locate
from ..folder._files import read_bounded
from ._diffs import unified
from ._edit import EDIT_LIMIT
from ._fs import open_path, write_atomic

_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1, "description": "file path, relative to the working directory"},
        "content": {"type": "string", "description": "the file's whole new content"},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}


async def _run_write(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    name = input["path"]
    located = locate(ctx, name)
    if isinstance(located, ToolResult):
        return located
    path, _ = located
    if path.is_dir():
        return ToolResult(f"{name} is a directory, not a file", is_error=True)
    try:
        data = input["content"].encode("utf-8")
    except UnicodeEncodeError as exc:
        return ToolResult(f"cannot write {name}: the content is not valid text ({exc.reason})", is_error=True)
    before = await ctx.in_thread(_text_of, str(path))
    try:
        created = await ctx.in_thread(write_atomic, str(path), data)
    except NotADirectoryError:
        return ToolResult(f"cannot write {name}: a folder on its path is a file", is_error=True)
    except OSError as exc:
        return ToolResult(f"cannot write {name}: {exc.strerror or exc}", is_error=True)
    diff = unified(before or "", input["content"], name) if before is not None or created else None
    return ToolResult(
        f"{'created' if created else 'overwrote'} {name} ({len(data)} bytes)",
        meta={"bytes": len(data), "created": created, **({"diff": diff} if diff else {})},
    )


def _text_of(path: str) -> str | None:
    """The file's text before the write, for the diff of what it changed (None: none to
    show: no such file, or one edit would not read)."""
    try:
        return read_bounded(path, EDIT_LIMIT, opener=open_path).decode("utf-8", errors="surrogateescape")
    except (OSError, ValueError):
        return None


WRITE = Tool(
    "write",
    "Write a file's whole content, creating it (and its folders) or replacing it. The path is "
    "relative to the working directory and must stay inside it. To change part of a file, "
    "use edit.",
    _SCHEMA,
    _run_write,
)
