"""The ``ask_human`` tool: a question for the people watching the session.

The loop answers it, not a program: the call becomes ``human.asked``, every attached client
sees the question, and the first answer (``human.respond``) is the call's result. Its entry
here gives the model the schema and the description.
"""

from __future__ import annotations

from typing import Any, Mapping

from roost.loop import ASK_HUMAN as _NAME

from ._base import Tool, ToolContext, ToolResult

_SCHEMA = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 1, "description": "the question, complete on its own"},
        "choices": {
            "type": "array",
            "items": {"type": "string"},
            "description": "answers to offer, if the question has a few likely ones",
        },
    },
    "required": ["question"],
    "additionalProperties": False,
}


async def _not_a_program(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    return ToolResult("ask_human is answered by a person through roost; it does not run here", is_error=True)


ASK_HUMAN = Tool(
    _NAME,
    "Ask the people watching this session a question and wait for their answer (which is "
    "this call's result). Use it when a decision is theirs to make or a fact only they "
    "know; not for things you can find out with the other tools.",
    _SCHEMA,
    _not_a_program,
)
