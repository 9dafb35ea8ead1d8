"""MCP tools as the model sees them: ``server__tool`` names, and results as tool results.

Pure functions on the SDK's values (read by attribute, so this module imports no ``mcp``).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import Any, Iterable, Mapping

from roost.daemon.tools import ToolResult
from roost.daemon.tools._media import MAX_INPUT_BYTES, Media, MediaError, image_media, kilobytes

#: Between the server's name and the tool's: ``time__get_current_time``.
SEPARATOR = "__"
# Providers accept tool names of [A-Za-z0-9_-], 64 characters at most (OpenAI's limit).
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_MAX_NAME = 64


@dataclass(frozen=True, slots=True)
class McpTool:
    """One tool of a ready MCP server."""

    #: What the model calls it: ``server__tool``.
    name: str
    server: str
    #: The server's own name for it.
    tool: str
    description: str
    input_schema: Mapping[str, Any]
    #: The server marks it as only reading (its ``readOnlyHint``): it may run beside others.
    read_only: bool = False


def qualified_name(server: str, tool: str) -> str:
    """``server__tool``, with characters providers refuse replaced by ``_``, cut to 64."""
    return f"{server}{SEPARATOR}{_UNSAFE.sub('_', tool)}"[:_MAX_NAME]


def split_name(name: str) -> tuple[str, str] | None:
    """``(server, tool)`` of a ``server__tool`` name, or None when it has no separator."""
    server, sep, tool = name.partition(SEPARATOR)
    return (server, tool) if sep and server and tool else None


def selected(name: str, patterns: Iterable[str] | None) -> bool:
    """Whether ``name`` is one of ``patterns`` (exact names or globs like ``server__*``)."""
    return patterns is None or any(fnmatchcase(name, p) for p in patterns)


def mcp_tool(server: str, tool: Any) -> McpTool:
    """An SDK ``Tool`` of ``server`` as an :class:`McpTool`."""
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {"type": "object"}
    return McpTool(
        name=qualified_name(server, tool.name),
        server=server,
        tool=tool.name,
        description=tool.description or tool.title or "",
        input_schema=schema,
        read_only=bool(getattr(getattr(tool, "annotations", None), "read_only_hint", False)),
    )


def as_server(tool: McpTool, server: str) -> McpTool:
    """``tool`` as offered under the name ``server`` (one server may have a name per project)."""
    if tool.server == server:
        return tool
    return replace(tool, name=qualified_name(server, tool.tool), server=server)


def tool_result(result: Any) -> ToolResult:
    """An SDK ``CallToolResult`` as the model sees it (blocking: an image may be scaled).

    Text blocks are joined; an image, audio, or an embedded resource's image or PDF becomes
    a part the model is sent (:class:`Media`: an image checked and scaled down like one
    ``read`` gives) and a short line in the text where it stood (``[image 800x600,
    45 KB]``); one that cannot be sent (not decodable, too large) only a line saying why.
    Other binary resources are named. Structured content goes to ``meta["structured"]``,
    and the model gets it in one form only: as JSON when no text carries it, else not at
    all (see :func:`_carried`: the spec asks servers to send it as text too, and a file
    server that sends a file's text and ``{"content": <the same text>}`` must not double
    the result). ``isError`` becomes ``is_error``.
    """
    parts: list[str] = []
    texts: list[str] = []
    media: list[Media] = []
    for block in result.content:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
            texts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(_media(kind, block.mime_type, block.data, media))
        elif kind == "resource_link":
            about = f": {block.description}" if block.description else ""
            parts.append(f"[resource link: {block.uri} ({block.name}){about}]")
        elif kind == "resource":
            inner = block.resource
            mime = inner.mime_type or "application/octet-stream"
            if getattr(inner, "text", None) is not None:
                parts.append(inner.text)
                texts.append(inner.text)
            elif mime.startswith("image/") or mime == PDF:
                parts.append(f"[resource: {inner.uri}] " + _media("image" if mime != PDF else "document", mime, inner.blob, media))
            else:
                parts.append(f"[resource: {inner.uri}, {mime}, {_decoded_size(inner.blob)} bytes]")
        else:
            parts.append(f"[{kind} content not shown]")
    meta: dict[str, Any] = {}
    structured = result.structured_content
    if structured is not None:
        meta["structured"] = structured
        if not _carried(texts, structured):
            parts.append(json.dumps(structured, ensure_ascii=False))
    return ToolResult("\n".join(parts), is_error=bool(result.is_error), meta=meta, parts=tuple(media))


def has_media(result: Any) -> bool:
    """Whether a ``CallToolResult`` holds blocks that :func:`tool_result` decodes."""
    return any(getattr(block, "type", None) in ("image", "audio", "resource") for block in result.content)


#: The media type of the documents a result's resources may carry to the model.
PDF = "application/pdf"


def _media(kind: str, mime: str, data: str, found: list[Media]) -> str:
    """The line of a result's text for an image, audio or PDF (``data`` base64); the part
    itself added to ``found`` when it can be sent."""
    try:
        raw = base64.b64decode(data)
    except (binascii.Error, ValueError):
        return f"[{kind}: {mime}, not sent: its data is not base64]"
    if len(raw) > MAX_INPUT_BYTES:
        return f"[{kind}: {mime}, {kilobytes(len(raw))}, not sent: over the {kilobytes(MAX_INPUT_BYTES)} sent at most]"
    try:
        part = image_media(raw) if kind == "image" else Media(kind, mime, raw)
    except MediaError as exc:
        return f"[{kind}: {mime}, {kilobytes(len(raw))}, not sent: {exc}]"
    found.append(part)
    return f"[{part.describe()}]"


def _decoded_size(data: str) -> int:
    """Bytes that a base64 string decodes to (without decoding it)."""
    data = data.strip()
    return len(data) * 3 // 4 - data[-2:].count("=")


#: How much searching :func:`_carried` may do (values to find times characters to search)
#: before it sends the JSON rather than look further.
_SEARCH_BUDGET = 50_000_000


def _carried(texts: list[str], value: Any) -> bool:
    """Whether the text blocks already say what the structured content ``value`` says: one
    of them (or all together) is its JSON, however spaced; or each of its strings and numbers
    stands in the text whole (spaces aside), as in ``{"content": <the text>}``. Booleans
    and nulls are not looked for: alone they say too little to find."""
    if not texts:
        return False
    joined = "\n".join(texts)
    if any(_same_json(text, value) for text in (*texts, joined)):
        return True
    leaves = [" ".join(leaf.split()) for leaf in _leaves(value)]
    leaves = [leaf for leaf in leaves if leaf]
    haystack = " ".join(joined.split())
    if not leaves or len(leaves) * len(haystack) > _SEARCH_BUDGET:
        return False
    return all(_stands_in(leaf, haystack) for leaf in leaves)


def _leaves(value: Any) -> list[str]:
    """The strings and numbers in a JSON value, numbers written as JSON writes them."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, (int, float)):
        return [json.dumps(value)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return []


def _stands_in(leaf: str, text: str) -> bool:
    """``leaf`` in ``text``, not as a piece of a longer word (``a`` is not in ``cat``)."""
    start = text.find(leaf)
    while start != -1:
        end = start + len(leaf)
        clear_before = start == 0 or not (_wordy(leaf[0]) and _wordy(text[start - 1]))
        clear_after = end == len(text) or not (_wordy(leaf[-1]) and _wordy(text[end]))
        if clear_before and clear_after:
            return True
        start = text.find(leaf, start + 1)
    return False


def _wordy(char: str) -> bool:
    return char.isalnum() or char == "_"


def _same_json(text: str, value: Any) -> bool:
    try:
        return json.loads(text) == value
    except ValueError:
        return False
