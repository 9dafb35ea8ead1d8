"""The ``todo`` tool: the checklist the model keeps for the task at hand (Claude Code's
TodoWrite).

Each call replaces the whole list. The result is the list as text, for the model, and
``meta["todos"]`` is the same list as data, for the clients: the current checklist is the
one in the last ``tool.finished`` of ``todo``, so every client shows it from the events it
already gets (``roost dispatch`` prints it when it changes, the shell keeps it in its
toolbar). Nothing is kept anywhere else, so a call changes nothing the permission rules
guard: agent mode runs it without asking.
"""

from __future__ import annotations

from typing import Any, Mapping

from roost.loop import TODO as _NAME

from ._base import Tool, ToolContext, ToolResult

STATUSES = ("pending", "in_progress", "completed")
_MARKS = {"pending": "[ ]", "in_progress": "[>]", "completed": "[x]"}

_SCHEMA = {
    "type": "object",
    "properties": {
        "todos": {
            "type": "array",
            "maxItems": 100,
            "description": "the whole list, in order; it replaces the one before",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string", "minLength": 1, "maxLength": 500, "description": "what to do"},
                    "status": {"enum": list(STATUSES)},
                    "activeForm": {
                        "type": "string",
                        "maxLength": 500,
                        "description": "the same, as shown while it is in progress (Running the tests)",
                    },
                },
                "required": ["content", "status"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["todos"],
    "additionalProperties": False,
}


async def _run_todo(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    todos = [
        {"content": " ".join(t["content"].split()), "status": t["status"]}
        | ({"activeForm": " ".join(t["activeForm"].split())} if t.get("activeForm") else {})
        for t in input["todos"]
    ]
    return ToolResult(checklist(todos), meta={"todos": todos})


def checklist(todos: list[dict[str, str]]) -> str:
    """The list as the model reads it: a count, then one line per item."""
    if not todos:
        return "The checklist is empty."
    done = sum(t["status"] == "completed" for t in todos)
    lines = [f"{done} of {len(todos)} done:"]
    lines += [f"{_MARKS[t['status']]} {t['content']}" for t in todos]
    return "\n".join(lines)


TODO = Tool(
    _NAME,
    "Keep a checklist for the task at hand, which the people watching see: the steps, each "
    "pending, in_progress or completed. Each call gives the whole list and replaces the one "
    "before. Use it for work of three steps or more: write it when you start, mark a step "
    "in_progress as you begin it (one at a time) and completed as soon as it is done.",
    _SCHEMA,
    _run_todo,
)
