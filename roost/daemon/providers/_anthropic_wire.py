"""The Anthropic Messages API's wire format, sans IO: request body, stream fold, error text.

Plain data in, plain data out, like h11: :func:`request_params` maps a :class:`ModelRequest`
to the body of ``POST /v1/messages``, :class:`AnthropicFold` folds the decoded SSE events of
its streamed answer into a :class:`ModelReply`, and :func:`status_error` words an error
status as a :class:`ProviderError`. :mod:`._anthropic` sends and reads; nothing here touches
a socket, the SDK or the clock, so all of it is tested on recorded transcripts alone.

Request mapping:

- Content blocks are copied by whitelisting the API's fields; thinking blocks (and
  ``redacted_thinking``) go back exactly as they came, so their signatures stay valid (the
  API rejects a thinking block whose text or signature changed). A block of a kind we do not
  know is passed through in the API's own shape. Our media parts (``{"type": "image" or
  "document", "media_type", "sha256", "data"}``, ``data`` base64) become the API's image and
  document blocks with a ``base64`` source, in user messages and in a tool result's content
  (which is sent as a list of blocks when it is one); an audio part becomes a text note (the
  API takes no audio).
- Extended thinking: ``request.think`` (a budget in tokens) becomes ``thinking: {"type":
  "enabled", "budget_tokens": N}``. The API's minimum budget is 1024, so a smaller positive
  budget is raised to 1024; ``None`` or a budget of 0 or less means no thinking. The API
  also requires ``max_tokens > budget_tokens`` (the budget is part of the output): when the
  request's ``max_tokens`` is not above the budget, ``max_tokens`` becomes budget + the
  request's ``max_tokens``, so the answer after the thinking keeps the room the caller
  asked for. (The sum may exceed a model's output limit; the API then answers 400, which
  comes back as a :class:`ProviderError` naming the limit.)
- Prompt caching: the cache prefix is read in the order tools, system, messages, and the API
  caches up to each ``cache_control`` breakpoint (at most 4 per request). We set 3, each
  ``{"type": "ephemeral"}``: on the last tool definition (the tools alone, for when the system
  prompt changes), on the system prompt (sent as a list of text blocks to carry it: the mark
  is on the first, and ``system_tail``, what changes between runs or within one, comes
  after it, so that a new tail leaves the cached part as it was), and
  on the last cacheable block of the last message (not a thinking block, which cannot carry
  one). The last-message breakpoint moves forward every turn; the API finds the previous
  turn's entry by looking back from it (up to 20 blocks), so a long session re-reads its
  history from the cache and pays full price only for what the last turn added. For that
  the history must be sent byte for byte the same each turn, so a message whose content is
  a string is always sent as the one text block it stands for (it becomes a list when it
  is last and carries the mark). The marks go on the copies sent, never on the request's
  messages, and a ``cache_control`` arriving on a passed-through block is dropped, so the
  count stays ours.
- Web search: ``request.web_search`` adds Anthropic's server tool (``web_search_20250305``,
  with ``max_uses`` and the domain lists) after the client tools. Its ``server_tool_use`` and
  ``web_search_tool_result`` blocks, and the ``citations`` on text, go back as they came
  (their encrypted parts must). A reply the API paused (``pause_turn``) is continued by
  sending it back as the last message, which the loop does.
- The keys are in the order ``messages.create()`` would send them, so :func:`json_body` of
  the params is the same bytes the SDK would send.

Stream fold: ``message_start`` and ``message_delta`` carry the usage (the latter's counts
are cumulative and replace the former's; the searches a reply made are
``web_search_requests``), ``content_block_*`` build the blocks (text, thinking and tool
JSON, a server tool's too, are joined once, at ``content_block_stop``; ``citations_delta``
adds a source to its text), ``message_delta`` the
stop reason (passed through as the API names it), ``message_stop`` the end. ``ping`` and
unknown events are ignored, as the API's versioning policy asks.

Errors (each a :class:`ProviderError` naming ``anthropic``)::

    ``event: error`` inside the stream    -> "anthropic: overloaded_error during the stream:
                                             Overloaded"
    malformed event (not JSON, a field
    missing)                              -> "anthropic: malformed content_block_delta
                                             event (KeyError: 'delta')"
    tool input that is not a JSON object  -> "anthropic: tool_use 'read' input is not JSON
                                             (...)"
    no message_stop, no stop_reason       -> "anthropic: stream ended before message_stop"
    a known block without a field         -> "anthropic: cannot send a tool_use block
                                             without 'id'", before anything is sent
    status 401, 403, 404                  -> ProviderUnavailable (bad key, no access,
                                             unknown model)
    other statuses                        -> "anthropic: 529 overloaded_error: Overloaded"
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from ._base import ModelReply, ModelRequest, ProviderError, ProviderUnavailable, WebSearch
from ._wire import after_retries

__all__ = ["WEB_SEARCH_REQUESTS", "WEB_SEARCH_TOOL", "AnthropicFold", "request_params", "status_error"]

#: The version of Anthropic's server-side web search tool a request offers.
WEB_SEARCH_TOOL = "web_search_20250305"
#: The usage key counting a reply's web searches (the API's
#: ``usage.server_tool_use.web_search_requests``; they are billed apart from tokens).
WEB_SEARCH_REQUESTS = "web_search_requests"

#: Statuses that mean the provider cannot be used as configured, not that this call failed.
_UNAVAILABLE_STATUSES = frozenset({401, 403, 404})

#: The smallest ``thinking.budget_tokens`` the API accepts.
_MIN_THINKING_BUDGET = 1024

#: Blocks that cannot carry ``cache_control``.
_UNCACHEABLE = frozenset({"thinking", "redacted_thinking"})

_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens",
               "cache_creation_input_tokens")

_NO_DELTAS: tuple[tuple[str, str], ...] = ()


# -- request ----------------------------------------------------------------------------------


def request_params(request: ModelRequest) -> dict[str, Any]:
    """The body of ``POST /v1/messages`` for ``request`` (streamed), as plain data.

    Raises:
        ProviderError: a block of a known kind lacks a field the API needs.
    """
    max_tokens = request.max_tokens
    thinking: dict[str, Any] | None = None
    if request.think is not None and request.think > 0:
        budget = max(request.think, _MIN_THINKING_BUDGET)
        if max_tokens <= budget:  # the API wants max_tokens > budget_tokens
            max_tokens = budget + request.max_tokens
        thinking = {"type": "enabled", "budget_tokens": budget}
    # In the order messages.create() would send them.
    params: dict[str, Any] = {
        "max_tokens": max_tokens,
        "messages": [_api_message(m) for m in request.messages],
        "model": request.model,
        "stream": True,
    }
    system = []
    if request.system:
        system.append({"type": "text", "text": request.system, "cache_control": _ephemeral()})
    if request.system_tail:
        # After the breakpoint: a changed tail leaves the cached prefix as it was.
        system.append({"type": "text", "text": request.system_tail})
    if system:
        params["system"] = system
    if thinking is not None:
        params["thinking"] = thinking
    tools: list[dict[str, Any]] = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in request.tools
    ]
    if request.web_search is not None:
        tools.append(_web_search_tool(request.web_search))
    if tools:
        tools[-1]["cache_control"] = _ephemeral()
        params["tools"] = tools
    if params["messages"]:
        _mark_last_block(params["messages"][-1])
    return params


def _web_search_tool(search: WebSearch) -> dict[str, Any]:
    tool: dict[str, Any] = {"type": WEB_SEARCH_TOOL, "name": "web_search", "max_uses": search.max_uses}
    if search.allowed_domains:
        tool["allowed_domains"] = list(search.allowed_domains)
    if search.blocked_domains:
        tool["blocked_domains"] = list(search.blocked_domains)
    return tool


def _ephemeral() -> dict[str, str]:
    return {"type": "ephemeral"}


def _mark_last_block(message: dict[str, Any]) -> None:
    """Put a cache breakpoint on the message's last block that can carry one (in place: the
    message is already our copy)."""
    content = message["content"]
    if isinstance(content, str):  # only an empty one, which the API rejects anyway
        return
    for block in reversed(content):
        if block.get("type") not in _UNCACHEABLE:
            block["cache_control"] = _ephemeral()
            return


def _api_message(message: Mapping[str, Any]) -> dict[str, Any]:
    content = message["content"]
    if isinstance(content, str):
        # As the one text block it stands for, so that a message is sent the same whether it
        # is the last (where it carries the cache breakpoint) or history: same prefix bytes.
        if not content:
            return {"role": message["role"], "content": content}
        return {"role": message["role"], "content": [{"type": "text", "text": content}]}
    blocks = [_api_block(b) for b in content]
    # The API rejects empty text blocks; a reply may have held one (text before a tool call).
    blocks = [b for b in blocks if not (b["type"] == "text" and not b["text"])]
    return {"role": message["role"], "content": blocks}


def _api_block(block: Mapping[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    try:
        if kind == "text":
            if block.get("citations"):
                # The sources of a reply's claims go back with it, as the API gave them.
                return {"type": "text", "text": block["text"], "citations": list(block["citations"])}
            return {"type": "text", "text": block["text"]}
        if kind in ("tool_use", "server_tool_use"):
            return {"type": kind, "id": block["id"], "name": block["name"],
                    "input": block["input"]}
        if kind == "tool_result":
            content = block.get("content", "")
            if not isinstance(content, str):
                # Text, images and documents, each in the API's shape.
                content = [b for b in map(_api_block, content) if not (b["type"] == "text" and not b["text"])]
            out: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": block["tool_use_id"],
                "content": content,
            }
            if block.get("is_error"):
                out["is_error"] = True
            return out
        if kind == "thinking":
            # Unchanged: the signature covers the thinking text.
            return {"type": "thinking", "thinking": block["thinking"],
                    "signature": block["signature"]}
        if kind == "redacted_thinking":
            return {"type": "redacted_thinking", "data": block["data"]}
        if kind in ("image", "document") and "sha256" in block:
            # A part of ours (see ``ModelRequest``): base64 in the API's source shape.
            source = {"type": "base64", "media_type": block["media_type"], "data": block["data"]}
            return {"type": kind, "source": source}
        if kind == "audio":
            return {"type": "text", "text": f"[audio {block.get('media_type', '')}: not sent, Anthropic models take no audio]"}
    except KeyError as exc:
        raise ProviderError(
            f"anthropic: cannot send a {kind} block without {exc.args[0]!r}") from None
    # A kind we do not know (an image, or a web search's results, whose encrypted parts
    # must go back unchanged): the API's own shape, passed through, less any
    # cache breakpoint (we place those, and the API allows only 4).
    return {k: v for k, v in block.items() if k != "cache_control"}


# -- reply --------------------------------------------------------------------------------------


class AnthropicFold:
    """Folds the Messages stream's events into neutral blocks, stop reason and usage.

    ``feed(event, data)`` per decoded SSE event returns the ``(kind, text)`` deltas to
    report (``"text"`` or ``"reasoning"``), so that the caller's ``on_delta`` runs outside
    the fold (its errors are not ours); :meth:`reply` gives the reply once the stream ended.

    Error handling: :meth:`feed` raises :class:`ProviderError` for an ``error`` event, a
    malformed event or a tool input that is not a JSON object; :meth:`reply` for a stream
    that ended before ``message_stop``. After an error the fold is not fed again.
    """

    def __init__(self) -> None:
        self._blocks: dict[int, dict[str, Any]] = {}
        # Text, thinking and tool JSON arrive in pieces; joined once, at content_block_stop.
        self._parts: dict[int, list[str]] = {}
        self._stop_reason: str | None = None
        self._usage: dict[str, int] = {}
        self._stopped = False
        #: Whether the reply's content has begun (its first block started).
        self.content_started = False

    def feed(self, name: str, data: str) -> tuple[tuple[str, str], ...]:
        """One event (its name and its data); the deltas it carries."""
        if name == "ping":
            return _NO_DELTAS
        try:
            event = json.loads(data)
            kind = event.get("type", name)
            if kind == "content_block_delta":
                return self._delta(event["index"], event["delta"])
            if kind == "content_block_start":
                self._start_block(event["index"], event["content_block"])
            elif kind == "content_block_stop":
                self._stop_block(event["index"])
            elif kind == "message_start":
                self._take_usage(event["message"].get("usage"))
            elif kind == "message_delta":
                self._stop_reason = event["delta"].get("stop_reason")
                # Counts on message_delta are cumulative: they replace message_start's.
                self._take_usage(event.get("usage"))
            elif kind == "message_stop":
                self._stopped = True
            elif kind == "error":
                error = event.get("error") or {}
                raise ProviderError(
                    f"anthropic: {error.get('type', 'error')} during the stream: "
                    f"{error.get('message', '')}"
                )
            # Unknown events: ignored, as the API's versioning policy asks.
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ProviderError(
                f"anthropic: malformed {name} event ({type(exc).__name__}: {exc})") from None
        return _NO_DELTAS

    def _delta(self, index: int, delta: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
        dtype = delta["type"]
        if dtype == "text_delta":
            self._parts[index].append(delta["text"])
            return (("text", delta["text"]),)
        if dtype == "thinking_delta":
            self._parts[index].append(delta["thinking"])
            return (("reasoning", delta["thinking"]),)
        if dtype == "input_json_delta":
            self._parts[index].append(delta["partial_json"])
        elif dtype == "signature_delta":
            self._blocks[index]["signature"] = delta["signature"]
        elif dtype == "citations_delta":
            self._blocks[index].setdefault("citations", []).append(delta["citation"])
        # Unknown deltas: nothing the loop keeps.
        return _NO_DELTAS

    def _start_block(self, index: int, block: Mapping[str, Any]) -> None:
        self.content_started = True
        btype = block["type"]
        if btype == "text":
            self._blocks[index] = {"type": "text", "text": ""}
            self._parts[index] = [block.get("text", "")]
        elif btype == "thinking":
            self._blocks[index] = {"type": "thinking", "thinking": "",
                                   "signature": block.get("signature") or ""}
            self._parts[index] = [block.get("thinking", "")]
        elif btype in ("tool_use", "server_tool_use"):
            self._blocks[index] = {"type": btype, "id": block["id"], "name": block["name"],
                                   "input": {}}
            self._parts[index] = []
        elif btype == "redacted_thinking":
            self._blocks[index] = {"type": "redacted_thinking", "data": block["data"]}
        else:
            self._blocks[index] = dict(block)

    def _stop_block(self, index: int) -> None:
        block = self._blocks.get(index)
        parts = self._parts.pop(index, None)
        if block is None or parts is None:
            return
        joined = "".join(parts)
        btype = block["type"]
        if btype == "text":
            block["text"] = joined
        elif btype == "thinking":
            block["thinking"] = joined
        elif btype in ("tool_use", "server_tool_use"):
            try:
                args = json.loads(joined) if joined else {}
            except ValueError as exc:
                raise ProviderError(
                    f"anthropic: {btype} {block['name']!r} input is not JSON ({exc})") from None
            if not isinstance(args, dict):
                raise ProviderError(
                    f"anthropic: {btype} {block['name']!r} input is not an object")
            block["input"] = args

    def _take_usage(self, usage: Mapping[str, Any] | None) -> None:
        if not usage:
            return
        for key in _USAGE_KEYS:
            value = usage.get(key)
            if value is not None:
                self._usage[key] = int(value)
        searches = (usage.get("server_tool_use") or {}).get("web_search_requests")
        if searches is not None:
            self._usage[WEB_SEARCH_REQUESTS] = int(searches)

    def reply(self) -> ModelReply:
        """The complete reply (no retries, no first-token time: those are the caller's).

        Raises:
            ProviderError: the stream ended before ``message_stop``, or gave no stop reason.
        """
        if not self._stopped or self._parts:
            raise ProviderError("anthropic: stream ended before message_stop")
        if self._stop_reason is None:
            raise ProviderError("anthropic: reply has no stop_reason")
        content = tuple(self._blocks[i] for i in sorted(self._blocks))
        return ModelReply(content=content, stop_reason=self._stop_reason, usage=dict(self._usage))


# -- errors -------------------------------------------------------------------------------------


def status_error(status: int, kind: str | None, message: str, retries: int) -> ProviderError:
    """An error status as the call's error: ``kind`` and ``message`` are the body's
    ``error.type`` and ``error.message`` (or what stands for them), ``retries`` the retries
    it took. :class:`ProviderUnavailable` for 401, 403 and 404."""
    text = f"anthropic: {status} {kind or 'error'}: {message}{after_retries(retries)}"
    if status in _UNAVAILABLE_STATUSES:
        return ProviderUnavailable(text)
    return ProviderError(text)
