"""``--input-format stream-json``: the task as Claude Code's SDK hosts send it.

An Agent SDK (``@anthropic-ai/claude-agent-sdk``, ``claude-agent-sdk`` for Python) starts
Claude Code with ``--input-format stream-json --output-format stream-json`` and writes JSON
lines to its standard input: ``control_request`` messages (``initialize`` first, with the
host's hooks and options) and ``user`` messages (``{"type": "user", "message": {"role":
"user", "content": ...}}``). This reads them up to the first user message, whose text is the
task (its base64 images go with it): ``initialize`` is answered with success (roost offers the host no commands of its own,
and runs its own hooks and permissions, not the host's callbacks), any other request with an
error that names it. What the run prints is ``_headless``'s stream; the host ends standard
input once it has the ``result``.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Callable, Iterable

#: What ``initialize`` is answered with.
_INITIALIZED: dict[str, Any] = {"commands": [], "models": [], "output_style": "default", "available_output_styles": ["default"]}


class StreamInputError(ValueError):
    """Standard input that holds no task in Claude Code's stream-json form; says why."""


def read_task(lines: Iterable[str], write: Callable[[str], None]) -> tuple[str, list[dict[str, Any]]]:
    """The text of the first user message of ``lines``, and its images (base64 image
    blocks, as ``dispatch`` sends images), answering the control requests before it through
    ``write`` (one JSON line each).

    Raises:
        StreamInputError: a line that is not a JSON object, or no user message.
    """
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError as exc:
            raise StreamInputError(f"standard input line {number} is not JSON: {exc}") from None
        if not isinstance(message, dict):
            raise StreamInputError(f"standard input line {number} is not a JSON object")
        kind = message.get("type")
        if kind == "control_request":
            write(json.dumps(_answer(message)) + "\n")
        elif kind == "user":
            return _text(message.get("message", {}), number), _images(message.get("message", {}), number)
    raise StreamInputError("standard input ended before a user message")


def _answer(message: dict[str, Any]) -> dict[str, Any]:
    request = message.get("request") or {}
    subtype = request.get("subtype") if isinstance(request, dict) else None
    response: dict[str, Any] = {"request_id": message.get("request_id")}
    if subtype == "initialize":
        response |= {"subtype": "success", "response": _INITIALIZED}
    else:
        response |= {"subtype": "error", "error": f"roost does not answer {subtype!r} control requests"}
    return {"type": "control_response", "response": response}


def _text(message: Any, number: int) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
        if texts:
            return "\n\n".join(texts)
    raise StreamInputError(f"standard input line {number}: the user message has no text")


def _images(message: Any, number: int) -> list[dict[str, Any]]:
    """The user message's image blocks (``{"type": "image", "source": {"type": "base64",
    "media_type", "data"}}``) as dispatch's images; the daemon checks them."""
    content = message.get("content") if isinstance(message, dict) else None
    images: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else ():
        source = block.get("source") if isinstance(block, dict) and block.get("type") == "image" else None
        if not isinstance(source, dict) or source.get("type") != "base64" or not isinstance(source.get("data"), str):
            continue
        try:
            images.append({"name": f"image {len(images) + 1}", "data": base64.b64decode(source["data"], validate=True)})
        except binascii.Error:
            raise StreamInputError(f"standard input line {number}: an image's data is not base64") from None
    return images
