"""The ``read`` tool: a text file's lines, numbered, with an optional range.

A path outside the working directory is read only when the call was allowed to go there
(the permission policy asks first); it is marked ``meta["outside"]``.
"""

from __future__ import annotations

from typing import Any, Mapping

import trio

from ._base import Tool, ToolContext, ToolResult, outside_result, resolve_path, truncate

_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1, "description": "file path, relative to the working directory"},
        "offset": {"type": "integer", "minimum": 1, "description": "first line to read (1-based)"},
        "limit": {"type": "integer", "minimum": 1, "description": "how many lines to read"},
    },
    "required": ["path"],
    "additionalProperties": False,
}

_DEFAULT_LIMIT = 2000


async def _run_read(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    path, inside = resolve_path(ctx, input["path"])
    refused = None if inside else outside_result(input["path"], path, ctx)
    if refused is not None:
        return refused
    if ctx.read_permission is not None and ctx.read_permission(str(path)) == "deny":
        # Decided on where it led then; a link changed since must not reach a denied file.
        return ToolResult(f"{input['path']} resolves to {path}, which the rules deny reading", is_error=True)
    offset = input.get("offset", 1)
    limit = input.get("limit", _DEFAULT_LIMIT)
    try:
        data = await trio.Path(path).read_bytes()
    except FileNotFoundError:
        return ToolResult(f"no such file: {input['path']}", is_error=True)
    except IsADirectoryError:
        return ToolResult(f"{input['path']} is a directory, not a file", is_error=True)
    except OSError as exc:
        return ToolResult(f"cannot read {input['path']}: {exc.strerror}", is_error=True)
    lines = data.decode("utf-8", errors="replace").splitlines()
    chosen = lines[offset - 1 : offset - 1 + limit]
    width = len(str(offset + len(chosen)))
    text = "\n".join(f"{n:>{width}}\t{line}" for n, line in enumerate(chosen, start=offset))
    if offset - 1 + limit < len(lines):
        text += f"\n[{len(lines) - (offset - 1 + limit)} more lines; read on with offset]"
    if not lines:
        text = "[empty file]"
    elif not chosen:
        text = f"[the file has {len(lines)} lines; offset {offset} is past the end]"
    return ToolResult(
        truncate(text, ctx.output_limit), meta={"bytes": len(data), "lines": len(lines), "outside": not inside}
    )


READ = Tool(
    "read",
    "Read a text file. Lines are numbered; use offset and limit for a range of a large file.",
    _SCHEMA,
    _run_read,
    read_only=True,
)
