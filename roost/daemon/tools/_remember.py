"""The ``remember`` tool: a line appended to the project's or the user's memory file.

The memory files (``.roost/MEMORY.md`` in the project, ``MEMORY.md`` in the user config
dir) are part of every later system prompt, so what the agent learns carries over to the
next session.
"""

from __future__ import annotations

import datetime
from typing import Any, Mapping

import trio

from .._project import memory_files
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


async def _run_remember(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    scope = input.get("scope", "project")
    path = trio.Path(memory_files(ctx.cwd)[scope])
    await path.parent.mkdir(parents=True, exist_ok=True)
    line = " ".join(input["text"].split())
    async with await path.open("a", encoding="utf-8") as f:
        await f.write(f"- {line} ({datetime.date.today().isoformat()})\n")
    return ToolResult(f"remembered in {path}", meta={"path": str(path), "scope": scope})


REMEMBER = Tool(
    "remember",
    "Remember one fact for later sessions (a convention, a command that works, a decision "
    "of the user): it is appended to the memory file that every later system prompt shows.",
    _SCHEMA,
    _run_remember,
)
