"""The context window: what the model sees of a session, how big it is, and where to cut.

After a compaction the model sees the summary (in the system prompt) and the history from
the cut on, behind one short user message; the stored history itself is never changed.
Sizes are estimates: the last usage the provider reported (which counted everything up to
that reply), plus about four characters a token for what came after it, and for each
image its pixels / 750 (a fixed amount for a large one, or other media).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

#: Characters per token, for text the provider has not counted yet.
CHARS_PER_TOKEN = 4
#: Tokens counted for an image or other media block; an image of known size counts as
#: Anthropic counts one, about width x height / 750 (:data:`PIXELS_PER_TOKEN`), up to this.
MEDIA_TOKENS = 1500
PIXELS_PER_TOKEN = 750
#: The user message that opens a compacted history.
RESUME = "(The earlier part of this conversation is summarized in the system prompt. Continue the task.)"


def block_tokens(block: Mapping[str, Any]) -> int:
    """Estimated tokens of one content block."""
    kind = block.get("type")
    if kind in ("image", "document", "audio"):
        width, height = block.get("width"), block.get("height")
        if kind == "image" and isinstance(width, int) and isinstance(height, int):
            return min(MEDIA_TOKENS, width * height // PIXELS_PER_TOKEN + 1)
        return MEDIA_TOKENS
    if kind == "text":
        size = len(str(block.get("text", "")))
    elif kind == "tool_result":
        content = block.get("content", "")
        if isinstance(content, list):
            return sum(block_tokens(b) for b in content if isinstance(b, Mapping))
        size = len(str(content))
    elif kind == "tool_use":
        size = len(str(block.get("name", ""))) + len(json.dumps(block.get("input", {}), default=str))
    else:
        size = len(str(block.get("thinking", block.get("text", ""))))
    return size // CHARS_PER_TOKEN + 1


def messages_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """Estimated tokens of ``messages``."""
    return sum(block_tokens(b) for m in messages for b in m.get("content", ()))


def estimate(messages: Sequence[Mapping[str, Any]], anchor_tokens: int, anchor_at: int, start: int) -> int:
    """Tokens the next model call will send: the anchor (usage reported when the history had
    ``anchor_at`` messages) plus estimates for the messages after it (from ``start`` on)."""
    return anchor_tokens + messages_tokens(messages[max(anchor_at, start) :])


def cut_point(messages: Sequence[Mapping[str, Any]], start: int, keep_turns: int) -> int | None:
    """Where to cut so that the last ``keep_turns`` replies (at least one) stay whole
    (None: no cut).

    The cut is always just before an assistant message, so a tool call and its result are
    never separated; and it leaves something to summarize beyond what is already summarized.
    """
    keep = max(1, keep_turns)
    replies = [i for i in range(start, len(messages)) if messages[i].get("role") == "assistant"]
    if len(replies) <= keep:
        return None
    cut = replies[-keep]
    return cut if cut > start + 1 else None


def visible(messages: Sequence[Mapping[str, Any]], start: int) -> tuple[Mapping[str, Any], ...]:
    """The messages the model sees when everything before ``start`` is summarized."""
    if start <= 0:
        return tuple(messages)
    return ({"role": "user", "content": [{"type": "text", "text": RESUME}]}, *messages[start:])
