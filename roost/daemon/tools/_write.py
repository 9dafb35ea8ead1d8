"""The ``write`` tool: a whole file's content, written atomically.

A write goes to a temporary file in the target's folder, then ``os.replace`` puts it in
place, so a reader sees the old file or the new one, never half of one. Paths that resolve
(symlinks followed) outside the working directory are refused.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path
from typing import Any, Mapping

from ._base import Tool, ToolContext, ToolResult, outside_result, resolve_path

_SCHEMA = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1, "description": "file path, relative to the working directory"},
        "content": {"type": "string", "description": "the file's whole new content"},
    },
    "required": ["path", "content"],
    "additionalProperties": False,
}


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` in one step (blocking; run it in a worker thread).

    An existing file keeps its permission bits; a new one gets the usual ``0o666`` less
    the umask. The temporary file is removed if anything fails.
    """
    try:
        mode: int | None = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as file:
            if mode is not None:
                os.fchmod(file.fileno(), mode)
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def _write(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path``, creating its folders; whether the file is new."""
    path.parent.mkdir(parents=True, exist_ok=True)
    created = not path.exists()
    write_atomic(path, data)
    return created


async def _run_write(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    name = input["path"]
    path, inside = resolve_path(ctx, name)
    refused = None if inside else outside_result(name, path, ctx)
    if refused is not None:
        return refused
    if path.is_dir():
        return ToolResult(f"{name} is a directory, not a file", is_error=True)
    try:
        data = input["content"].encode("utf-8")
    except UnicodeEncodeError as exc:
        return ToolResult(f"cannot write {name}: the content is not valid text ({exc.reason})", is_error=True)
    try:
        created = await ctx.in_thread(_write, path, data)
    except (FileExistsError, NotADirectoryError):
        return ToolResult(f"cannot write {name}: a folder on its path is a file", is_error=True)
    except OSError as exc:
        return ToolResult(f"cannot write {name}: {exc.strerror or exc}", is_error=True)
    return ToolResult(
        f"{'created' if created else 'overwrote'} {name} ({len(data)} bytes)",
        meta={"bytes": len(data), "created": created},
    )


WRITE = Tool(
    "write",
    "Write a file's whole content, creating it (and its folders) or replacing it. The path is "
    "relative to the working directory and must stay inside it. To change part of a file, "
    "use edit.",
    _SCHEMA,
    _run_write,
)
