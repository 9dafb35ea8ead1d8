"""The ``remember`` tool: a line appended to the project's or the user's memory file.

The memory files (``.roost/MEMORY.md`` in the project, ``MEMORY.md`` in the user config
dir) are part of every later system prompt, so what the agent learns carries over to the
next session.
"""

from __future__ import annotations

import datetime
import errno
import os
import stat
from pathlib import Path
from typing import Any, Mapping

from ..folder._files import FileRefused
from ..folder._project import memory_files, project_root
from ._base import Tool, ToolContext, ToolResult

_SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "what to remember, one fact"},
        "scope": {
            "enum": ["project", "user"],
            "description": "project (default): this project; user: every project",
        },
    },
    "required": ["text"],
    "additionalProperties": False,
}


def _append(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # O_NONBLOCK: a FIFO put there must be refused, not waited on.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    with open(fd, "a", encoding="utf-8") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileRefused(errno.EINVAL, f"{path} is not a regular file; nothing was written")
        f.write(f"- {line} ({datetime.date.today().isoformat()})\n")


async def _run_remember(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    scope = input.get("scope", "project")
    path = memory_files(project_root(ctx.cwd) or Path(ctx.cwd))[scope]
    try:
        await ctx.in_thread(_append, path, " ".join(input["text"].split()))
    except OSError as exc:
        return ToolResult(f"cannot remember: {exc.strerror or exc}", is_error=True)
    return ToolResult(f"remembered in {path}", meta={"path": str(path), "scope": scope})


REMEMBER = Tool(
    "remember",
    "Remember one fact for later sessions (a convention, a command that works, a decision "
    "of the user): it is appended to the memory file that every later system prompt shows.",
    _SCHEMA,
    _run_remember,
)
