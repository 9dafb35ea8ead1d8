"""The ``recall`` tool: the model searches what the daemon remembers (the memory files'
entries, earlier tasks with their answers, compaction summaries) with its own words."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any, Mapping

from ..folder._project import Place, project_root
from ..memory import MemoryIndex
from ..memory._files import RECALLED, USER_SCOPE, sync_memory_files
from ._base import Tool, ToolContext, ToolResult

_SCHEMA = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": 1000, "description": "what to look for, in words"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": f"entries at most (default {RECALLED})"},
    },
    "required": ["query"],
    "additionalProperties": False,
}


async def _run_recall(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    if ctx.memory is None:
        return ToolResult("nothing can be recalled here: this daemon keeps no memory index", is_error=True)
    index: MemoryIndex = ctx.memory
    root = await ctx.in_thread(lambda: project_root(ctx.cwd) or Path(ctx.cwd))
    place = Place(ctx.cwd, root, ctx.trusted_folder)
    await sync_memory_files(index, place)
    found = await index.search(input["query"], [USER_SCOPE, str(root)], int(input.get("limit", RECALLED)))
    if not found:
        return ToolResult("nothing remembered matches that", meta={"entries": []})
    lines = [
        f"[{e.id}] ({e.kind}, {e.source}, {datetime.date.fromtimestamp(e.created).isoformat()}) {e.text}"
        for e in found
    ]
    return ToolResult("\n\n".join(lines), meta={"entries": [e.id for e in found]})


RECALL = Tool(
    "recall",
    "Search what was remembered in earlier sessions: memory entries, earlier tasks with their "
    "answers, summaries of long sessions. Give the words to look for; the best matches come first.",
    _SCHEMA,
    _run_recall,
    read_only=True,
)
