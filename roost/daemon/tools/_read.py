"""The ``read`` tool: a text file's lines, numbered, with an optional range; an image
(the model sees it) or a PDF's text by page (``_read_media``), under the same path rules.

A read goes only as far as the lines it returns, so its memory never depends on the file's
size: the file is opened without blocking and must be a regular file (a FIFO, a device or
a socket is an error at once, never a wait); lines are read one at a time (see
``_lines``), a line longer than 65,536 characters is cut there and the read stops after it, and
no more lines are taken than the output limit can show. The result ends by saying whether
more lines follow and the offset to read on from; the rest of the file is never counted,
since counting would read all of it. Skipping to a far ``offset`` reads the lines before
it (one at a time, within the call's timeout).

A path outside the working directory is read only when the call was allowed to go there
(the permission policy asks first); it is marked ``meta["outside"]``. The file is opened at
the real path that was judged, following no link (a link swapped in since is refused:
``_fs``); a path into ``/proc``, ``/sys`` or ``/dev`` is refused.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import trio

from ..folder._files import open_regular
from ._base import Tool, ToolContext, ToolResult, locate, truncate
from ._fs import open_path
from ._lines import LINE_LIMIT, text_lines
from ._read_media import is_media, read_failure, read_media

_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1, "description": "file path, relative to the working directory"},
        "offset": {"type": "integer", "minimum": 1, "description": "first line (a PDF: page) to read (1-based)"},
        "limit": {"type": "integer", "minimum": 1, "description": "how many lines (a PDF: pages) to read"},
    },
    "required": ["path"],
    "additionalProperties": False,
}

_DEFAULT_LIMIT = 2000


@dataclass(slots=True)
class _Excerpt:
    """What one read found."""

    #: The file's size in bytes (from fstat: nothing is read to learn it).
    size: int
    #: The lines returned, the first being line ``offset``.
    lines: list[str] = field(default_factory=list)
    #: Lines seen: the whole file's count when the read reached its end.
    seen: int = 0
    #: The last line returned was cut at LINE_LIMIT; the read stopped there.
    cut: bool = False
    #: Another line follows the last one returned.
    more: bool = False


def _excerpt(path: Path, offset: int, limit: int, budget: int, stop: threading.Event) -> _Excerpt:
    """Lines ``offset`` to ``offset + limit - 1`` of ``path`` (blocking), as many as fit in
    ``budget`` characters (at least one)."""
    fd = open_regular(path, opener=open_path)
    with open(fd, "rb") as file:
        found = _Excerpt(os.fstat(fd).st_size)
        lines = text_lines(file, stop=stop)
        chars = 0
        for text, cut in lines:
            found.seen += 1
            if found.seen < offset:
                continue
            if found.lines and chars + len(text) > budget:
                found.more = True
                break
            found.lines.append(text)
            chars += len(text) + 8
            if cut:
                # Whether more lines follow is only known past the rest of this line:
                # not worth reading a huge line through to say so.
                found.cut = True
                break
            if len(found.lines) == limit:
                found.more = next(lines, None) is not None
                break
    return found


async def _run_read(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    name = input["path"]
    located = locate(ctx, name)
    if isinstance(located, ToolResult):
        return located
    path, inside = located
    if ctx.read_permission is not None and ctx.read_permission(str(path)) == "deny":
        # Decided on where it led then; a link changed since must not reach a denied file.
        return ToolResult(f"{name} resolves to {path}, which the rules deny reading", is_error=True)
    if is_media(path):
        return await read_media(name, path, inside, input, ctx)
    offset = input.get("offset", 1)
    limit = input.get("limit", _DEFAULT_LIMIT)
    stop = threading.Event()
    try:
        with trio.move_on_after(ctx.timeout) as scope:
            try:
                found = await ctx.in_thread(
                    _excerpt, path, offset, limit, ctx.output_limit, stop, abandon_on_cancel=True
                )
            finally:
                stop.set()
    except OSError as exc:
        return read_failure(name, exc)
    if scope.cancelled_caught:
        return ToolResult(
            f"read timed out after {ctx.timeout:g} s (reading the lines before offset {offset})", is_error=True
        )
    return ToolResult(_render(found, offset, ctx.output_limit), meta=_meta(found, inside))


def _render(found: _Excerpt, offset: int, output_limit: int) -> str:
    chosen = found.lines
    if not chosen:
        if found.seen == 0:
            return "[empty file]"
        return f"[the file has {found.seen} lines; offset {offset} is past the end]"
    width = len(str(offset + len(chosen)))
    text = "\n".join(f"{n:>{width}}\t{line}" for n, line in enumerate(chosen, start=offset))
    # The notes come after the cut, so that a long output never hides where to read on.
    text = truncate(text, output_limit)
    after = offset + len(chosen)
    if found.cut:
        text += (
            f"\n[line {after - 1} is longer than {LINE_LIMIT:,} characters and was cut there; "
            f"read on with offset {after}]"
        )
    elif found.more:
        text += f"\n[more lines follow; read on with offset {after}]"
    return text


def _meta(found: _Excerpt, inside: bool) -> dict[str, Any]:
    return {"bytes": found.size, "lines": len(found.lines), "more": found.more, "cut": found.cut, "outside": not inside}


READ = Tool(
    "read",
    "Read a text file. Lines are numbered; use offset and limit for a range of a large file. "
    "The end of the output says whether more lines follow and the offset to read on from. "
    "An image (png, jpg, gif, webp) is shown to you; a PDF gives its text by page (offset and "
    "limit count pages).",
    _SCHEMA,
    _run_read,
    read_only=True,
)
