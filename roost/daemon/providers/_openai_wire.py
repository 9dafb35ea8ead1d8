"""The Chat Completions wire format, sans IO: request body, stream fold, error text.

Plain data in, plain data out, like h11: :func:`request_body` maps a :class:`ModelRequest`
to the body of ``POST {base_url}/chat/completions``, :class:`OpenAIFold` folds the decoded
SSE events of its streamed answer (``chat.completion.chunk`` objects ending in ``data:
[DONE]``), or one whole ``chat.completion``, into a :class:`ModelReply`, and
:func:`status_error` reads an error response's status and body into a
:class:`ProviderError`. :mod:`._openai` sends, retries and reads; nothing here touches a
socket or the clock, so all of it is tested on recorded transcripts alone. Every error
message starts with the provider's configured name (``NAME``, ``openai`` by default).

Request mapping (neutral :class:`ModelRequest` -> Chat Completions):

- ``system`` -> a first ``{"role": "system"}`` message (left out when empty).
- user text blocks -> one user message (several text blocks joined with a blank line).
  Image blocks -> ``{"type": "image_url", "image_url": {"url": "data:TYPE;base64,..."}}``
  parts of that message (its content then a list of parts); documents and audio -> a text
  note that they were not sent (servers differ too much in what they take).
- ``tool_result`` blocks -> one ``{"role": "tool", "tool_call_id", "content"}`` message each,
  placed before the user's text of the same message (the API wants tool messages right
  after the assistant message that called them). A list content keeps its text blocks,
  joined with newlines; a tool message takes text only, so its images go in the user
  message after the tool messages, behind a line naming the call (the usual workaround).
  ``is_error`` prefixes the content with ``"Error: "``: the API has no error flag, and the
  model should not mistake a failure for output.
- a server that answers 400 about an image to a request with images (a model without
  vision) gets the request again with each image a note saying it was not sent, and from
  then on (``images=False``: :mod:`._openai` learns it once per model).
- assistant text -> ``content``; ``tool_use`` -> ``tool_calls`` ``[{id, type: "function",
  function: {name, arguments: JSON text}}]``. With tool calls and no text, ``content`` is
  ``null`` (Gemini's and Ollama's endpoints reject ``""`` there). ``thinking`` and
  ``redacted_thinking`` blocks (from an Anthropic model earlier in the session) are dropped:
  they cannot be replayed elsewhere.
- tools -> ``[{type: "function", function: {name, description, parameters}}]``.
- the reply's length limit goes by the name the caller gives (``max_tokens`` or
  ``max_completion_tokens``: which one a server takes is :mod:`._openai`'s to learn).
- ``think`` (a token budget, or None) -> ``reasoning_effort``: ``"low"`` below 4,096,
  ``"medium"`` below 16,384, else ``"high"``; sent only when ``think`` is set, since models
  without reasoning reject the parameter.
- always ``stream: true`` and ``stream_options: {include_usage: true}``.

Reply mapping:

- ``delta.content`` (and ``delta.refusal``) -> ``on_delta("text", ...)`` and one text block.
- ``delta.reasoning_content`` or ``delta.reasoning`` (vLLM, DeepSeek, Ollama, OpenRouter)
  -> ``on_delta("reasoning", ...)`` only: reasoning text is streamed, not kept in the
  history (those servers do not take it back).
- ``delta.tool_calls`` -> ``tool_use`` blocks, assembled by ``index`` across chunks (id and
  name usually in the first piece, ``arguments`` JSON text in any number of pieces, several
  calls possibly interleaved). Also handled: a call without ``index`` (Gemini: a new slot
  per call), a new id at an index whose call is complete (Ollama reuses index 0 for every
  parallel call), a call without an id (one is made up). Arguments must be a JSON object,
  else :class:`ProviderError` (unless the reply was cut at ``max_tokens``: then the call
  keeps ``{}`` and the loop answers it as not run).
- ``finish_reason``: ``stop`` -> ``end_turn``, ``tool_calls`` (and legacy ``function_call``)
  -> ``tool_use``, ``length`` -> ``max_tokens``, ``content_filter`` -> ``refusal``, others
  passed through. A reply with tool calls is ``tool_use`` even if the server says ``stop``.
- ``usage`` (the last chunk, thanks to ``include_usage``): ``completion_tokens`` ->
  ``output_tokens``; ``prompt_tokens_details.cached_tokens`` (or DeepSeek's
  ``prompt_cache_hit_tokens``) -> ``cache_read_input_tokens``; ``input_tokens`` is
  ``prompt_tokens`` **minus** the cached tokens, because OpenAI counts cached tokens inside
  ``prompt_tokens`` while the neutral usage (Anthropic's) does not, and cost is computed as
  ``input * price + cache_read * cache_price``.
- A server that ignores ``stream: true`` and answers one ``application/json`` completion is
  accepted: its text is reported as one delta.

Errors (each a :class:`ProviderError`)::

    ``{"error": ...}`` inside the stream  -> "NAME: server_error during the stream: ..."
    a malformed event                     -> "NAME: malformed event in the stream (...)"
    tool arguments not a JSON object      -> "NAME: tool call 'read' arguments are not JSON
                                             (...)"
    a body ending before ``[DONE]``       -> "NAME: stream ended before [DONE]"
    an unsendable block (another vendor's) -> "NAME: cannot send a server_tool_use block in
                                             an assistant message", before anything is sent
    status 401, 403, 404                  -> ProviderUnavailable "NAME: 401 invalid_api_key: ..."
    other statuses                        -> "NAME: 400 invalid_request_error: ..."

The error code is the body's ``error.code`` when it is a string, else ``error.type``
(OpenAI's shape is ``{"error": {"message", "type", "param", "code"}}``; vLLM's and others'
variants are read as well).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Mapping

from ._base import ModelReply, ModelRequest, ProviderError, ProviderUnavailable
from ._wire import after_retries, json_text, short

__all__ = ["OpenAIFold", "embeddings_of", "error_fields", "has_images", "request_body", "status_error"]

#: The media kinds a content block can be (see ``_base``).
MEDIA_KINDS = ("image", "document", "audio")

#: Statuses that mean the provider cannot be used as configured, not that this call failed.
_UNAVAILABLE_STATUSES = frozenset({401, 403, 404})

_STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}

_NO_DELTAS: tuple[tuple[str, str], ...] = ()

#: Blocks of an assistant message that only their vendor reads (Anthropic's thinking and
#: the searches its servers ran): a reply's text says what came of them.
_OTHER_VENDORS = frozenset({"thinking", "redacted_thinking", "server_tool_use", "web_search_tool_result"})


# -- request ----------------------------------------------------------------------------------


def request_body(
    request: ModelRequest, name: str, limit_field: str = "max_tokens", images: bool = True
) -> dict[str, Any]:
    """The body of ``POST {base_url}/chat/completions`` for ``request`` (streamed), as plain
    data, the reply's length limit named ``limit_field``; ``name`` starts error messages.
    Without ``images`` (the server refused them), each image is a note that says so.

    Raises:
        ProviderError: a block cannot be sent (another vendor's kind of block, a block
            without a field it needs).
    """
    messages: list[dict[str, Any]] = []
    if request.system_text:
        messages.append({"role": "system", "content": request.system_text})
    for message in request.messages:
        role, content = message["role"], message["content"]
        if isinstance(content, str):
            messages.append({"role": role, "content": content})
        elif role == "assistant":
            messages.append(_assistant_message(content, name))
        else:
            messages.extend(_user_messages(role, content, name, images))
    body: dict[str, Any] = {
        "model": request.model,
        "messages": messages,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [
            {"type": "function",
             "function": {"name": t.name, "description": t.description,
                          "parameters": t.input_schema}}
            for t in request.tools
        ]
    if request.think is not None:
        body["reasoning_effort"] = _reasoning_effort(request.think)
    body[limit_field] = request.max_tokens
    return body


def _reasoning_effort(budget: int) -> str:
    if budget < 4096:
        return "low"
    if budget < 16384:
        return "medium"
    return "high"


def _assistant_message(blocks: Any, name: str) -> dict[str, Any]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        try:
            if kind == "text":
                if block["text"]:
                    texts.append(block["text"])
            elif kind == "tool_use":
                calls.append({
                    "id": block["id"],
                    "type": "function",
                    "function": {"name": block["name"],
                                 "arguments": json_text(block["input"])},
                })
            elif kind in _OTHER_VENDORS:
                continue  # another vendor's private reasoning or searches: cannot be replayed here
            else:
                raise ProviderError(f"{name}: cannot send a {kind} block in an assistant message")
        except KeyError as exc:
            raise ProviderError(f"{name}: cannot send a {kind} block without {exc.args[0]!r}") from None
    out: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
    if calls:
        out["tool_calls"] = calls
    elif out["content"] is None:
        out["content"] = ""
    return out


def _user_messages(role: str, blocks: Any, name: str, images: bool) -> list[dict[str, Any]]:
    results: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in blocks:
        kind = block.get("type")
        try:
            if kind == "text":
                parts.append({"type": "text", "text": block["text"]})
            elif kind == "tool_result":
                content, media = _result_parts(block.get("content", ""), name)
                if block.get("is_error"):
                    content = f"Error: {content}" if content else "Error"
                results.append({"role": "tool", "tool_call_id": block["tool_use_id"],
                                "content": content})
                if media:
                    # A tool message takes text only: the result's media go in the user
                    # message after the tool messages (the usual workaround), introduced so
                    # that the model knows which call they came from.
                    parts.append({"type": "text", "text": f"[media of tool call {block['tool_use_id']}]"})
                    parts.extend(_media_part(m, name, images) for m in media)
            elif _ours(block):
                parts.append(_media_part(block, name, images))
            else:
                raise ProviderError(f"{name}: cannot send a {kind} block in a {role} message")
        except KeyError as exc:
            raise ProviderError(f"{name}: cannot send a {kind} block without {exc.args[0]!r}") from None
    if parts:
        results.append({"role": role, "content": _content(parts)})
    return results


def _content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A user message's content: its texts joined with a blank line, as a string when it is
    only text, else a list of parts (neighbouring texts joined)."""
    merged: list[dict[str, Any]] = []
    for part in parts:
        if part["type"] == "text" and merged and merged[-1]["type"] == "text":
            merged[-1] = {"type": "text", "text": f"{merged[-1]['text']}\n\n{part['text']}"}
        else:
            merged.append(part)
    if all(p["type"] == "text" for p in merged):
        return "\n\n".join(p["text"] for p in merged)
    return merged


def _media_part(block: Mapping[str, Any], name: str, images: bool) -> dict[str, Any]:
    """A media block as a content part: an image as a ``data:`` URL, or the note that says
    what was left out."""
    kind, media_type = block["type"], block["media_type"]
    if kind == "image" and images:
        return {"type": "image_url", "image_url": {"url": f"data:{media_type};base64,{block['data']}"}}
    if kind == "image":
        size = f" {block['width']}x{block['height']}" if "width" in block else ""
        why = f"{name}'s model takes no images"
    else:
        size, why = "", f"{name} is sent text and images only"
    return {"type": "text", "text": f"[{kind}{size} ({media_type}) not sent: {why}]"}


def _ours(block: Mapping[str, Any]) -> bool:
    """Whether ``block`` is a media part of ours with its bytes (not another API's shape)."""
    return block.get("type") in MEDIA_KINDS and "data" in block and "media_type" in block


def has_images(request: ModelRequest) -> bool:
    """Whether ``request`` carries an image (in a user message or a tool result)."""
    for message in request.messages:
        content = message["content"]
        if isinstance(content, str):
            continue
        for block in content:
            inner = block.get("content") if block.get("type") == "tool_result" else None
            if block.get("type") == "image" or (
                isinstance(inner, (list, tuple)) and any(b.get("type") == "image" for b in inner)
            ):
                return True
    return False


def _result_parts(content: Any, name: str) -> tuple[str, list[Mapping[str, Any]]]:
    """A tool result's text (its text blocks joined with newlines), and its media blocks."""
    if isinstance(content, str):
        return content, []
    texts, media = [], []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            texts.append(block["text"])
        elif _ours(block):
            media.append(block)
        else:
            raise ProviderError(f"{name}: cannot send a {kind} block in a tool result")
    return "\n".join(texts), media


# -- reply --------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Call:
    """A tool call being assembled."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def complete(self) -> bool:
        """Whether the arguments so far are a whole JSON value."""
        try:
            json.loads("".join(self.arguments))
        except ValueError:
            return False
        return True


class OpenAIFold:
    """Folds ``chat.completion.chunk`` events into neutral blocks, stop reason and usage.

    ``feed(event, data)`` per decoded SSE event returns the ``(kind, text)`` deltas to
    report (``"text"`` or ``"reasoning"``), so that the caller's ``on_delta`` runs outside
    the fold (its errors are not ours); :attr:`done` turns true at ``[DONE]``; :meth:`reply`
    gives the reply once the stream ended. ``name`` starts every error message.

    Error handling: :meth:`feed` raises :class:`ProviderError` for an error event or a
    malformed one; :meth:`reply` for a stream that ended before ``[DONE]`` (and without a
    finish reason), or a tool call without a name or with arguments that are not a JSON
    object. After an error the fold is not fed again.
    """

    def __init__(self, name: str) -> None:
        self._name = name
        self._text: list[str] = []
        self._calls: list[_Call] = []
        self._slots: dict[int, _Call] = {}  # the call each raw index now points at
        self._finish: str | None = None
        self._usage: dict[str, int] = {}
        self.done = False
        #: Whether the reply's content (text, reasoning or a tool call) has begun.
        self.content_started = False

    def feed(self, event: str, data: str) -> Sequence[tuple[str, str]]:
        """One event (its name and its data); the deltas it carries."""
        if data == "[DONE]":
            self.done = True
            return _NO_DELTAS
        try:
            chunk = json.loads(data)
        except ValueError:
            if event == "error":
                raise ProviderError(
                    f"{self._name}: error during the stream: {short(data)}") from None
            raise ProviderError(
                f"{self._name}: malformed event in the stream (not JSON: {short(data, 80)!r})"
            ) from None
        if not isinstance(chunk, dict):
            raise ProviderError(
                f"{self._name}: malformed event in the stream (not an object: {short(data, 80)!r})")
        if chunk.get("error") or event == "error":
            kind, message = error_fields(chunk)
            raise ProviderError(f"{self._name}: {kind} during the stream: {message}")
        try:
            return self._chunk(chunk)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ProviderError(
                f"{self._name}: malformed chunk in the stream ({type(exc).__name__}: {exc})"
            ) from None

    def feed_completion(self, data: str) -> list[tuple[str, str]]:
        """A whole (non-streamed) ``chat.completion`` object; sets :attr:`done`."""
        try:
            completion = json.loads(data)
            if completion.get("error"):
                kind, message = error_fields(completion)
                raise ProviderError(f"{self._name}: {kind}: {message}")
            choices = [{"index": c.get("index", 0), "delta": c.get("message") or {},
                        "finish_reason": c.get("finish_reason")}
                       for c in completion.get("choices") or ()]
            deltas = self._chunk({"choices": choices, "usage": completion.get("usage")})
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ProviderError(
                f"{self._name}: malformed completion ({type(exc).__name__}: {exc})") from None
        self.done = True
        return deltas

    def _chunk(self, chunk: Mapping[str, Any]) -> list[tuple[str, str]]:
        deltas: list[tuple[str, str]] = []
        usage = chunk.get("usage")
        if usage:
            self._take_usage(usage)
        for choice in chunk.get("choices") or ():
            if choice.get("index") not in (0, None):
                continue  # we ask for one choice (n = 1)
            delta = choice.get("delta") or {}
            if any(delta.get(k) for k in ("content", "refusal", "reasoning_content", "reasoning", "tool_calls")):
                self.content_started = True
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if reasoning and isinstance(reasoning, str):
                deltas.append(("reasoning", reasoning))
            for key in ("content", "refusal"):
                text = delta.get(key)
                if text:
                    self._text.append(text)
                    deltas.append(("text", text))
            for piece in delta.get("tool_calls") or ():
                self._tool_call_piece(piece)
            finish = choice.get("finish_reason")
            if finish:
                self._finish = finish
        return deltas

    def _tool_call_piece(self, piece: Mapping[str, Any]) -> None:
        function = piece.get("function") or {}
        call_id = piece.get("id") or ""
        name = function.get("name") or ""
        call = self._call_for(piece.get("index"), call_id, name)
        if call_id and not call.id:
            call.id = call_id
        if name and name != call.name:
            # Normally the whole name comes once; a repeated whole name is ignored, pieces
            # of a name are joined.
            call.name += name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            if arguments:
                call.arguments.append(arguments)
        elif arguments is not None:  # an object instead of JSON text (some servers)
            call.arguments.append(json.dumps(arguments))

    def _call_for(self, index: Any, call_id: str, name: str) -> _Call:
        if index is None:
            # No index (Gemini): each call arrives whole; a new id or name is a new call.
            for known in self._calls:
                if call_id and known.id == call_id:
                    return known
            if call_id or name or not self._calls:
                return self._new_call()
            return self._calls[-1]
        call = self._slots.get(index)
        if call is None:
            call = self._slots[index] = self._new_call()
        elif call_id and call.id and call_id != call.id and call.complete():
            # Ollama sends every parallel call at index 0, told apart by id. (LM Studio sends
            # a new id with every piece of one call: its arguments are not complete yet.)
            call = self._slots[index] = self._new_call()
        return call

    def _new_call(self) -> _Call:
        call = _Call()
        self._calls.append(call)
        return call

    def _take_usage(self, usage: Mapping[str, Any]) -> None:
        # Counts are cumulative (servers that send usage on every chunk send running totals).
        prompt = usage.get("prompt_tokens")
        completion = usage.get("completion_tokens")
        details = usage.get("prompt_tokens_details") or {}
        cached = details.get("cached_tokens")
        if cached is None:
            cached = usage.get("prompt_cache_hit_tokens")  # DeepSeek
        if prompt is not None:
            self._usage["input_tokens"] = int(prompt) - int(cached or 0)
        if completion is not None:
            self._usage["output_tokens"] = int(completion)
        if cached is not None:
            self._usage["cache_read_input_tokens"] = int(cached)

    def reply(self) -> ModelReply:
        """The complete reply (no retries, no first-token time: those are the caller's).

        Raises:
            ProviderError: see the class docstring.
        """
        if self._finish is None and not self.done:
            raise ProviderError(f"{self._name}: stream ended before [DONE]")
        stop_reason = _STOP_REASONS.get(self._finish or "", self._finish or "end_turn")
        if self._calls and stop_reason == "end_turn":
            stop_reason = "tool_use"  # some servers say "stop" after tool calls
        content: list[dict[str, Any]] = []
        text = "".join(self._text)
        if text:
            content.append({"type": "text", "text": text})
        for call in self._calls:
            content.append(self._tool_use(call, cut_off=stop_reason == "max_tokens"))
        return ModelReply(content=tuple(content), stop_reason=stop_reason, usage=dict(self._usage))

    def _tool_use(self, call: _Call, *, cut_off: bool) -> dict[str, Any]:
        if not call.name:
            raise ProviderError(f"{self._name}: a tool call came without a name")
        joined = "".join(call.arguments)
        try:
            args = json.loads(joined) if joined.strip() else {}
        except ValueError as exc:
            if not cut_off:
                raise ProviderError(
                    f"{self._name}: tool call {call.name!r} arguments are not JSON ({exc})"
                ) from None
            args = {}  # cut at max_tokens: the loop answers it as not run
        if not isinstance(args, dict):
            if not cut_off:
                raise ProviderError(
                    f"{self._name}: tool call {call.name!r} arguments are not a JSON object")
            args = {}
        return {"type": "tool_use", "id": call.id or f"call_{uuid.uuid4().hex[:24]}",
                "name": call.name, "input": args}


# -- errors -------------------------------------------------------------------------------------


def error_fields(body: Any) -> tuple[str, str]:
    """``(code or type, message)`` from an error body in OpenAI's shape or a cousin's."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, str):
        return "error", error
    if not isinstance(error, dict):
        error = body if isinstance(body, dict) else {}
    code = error.get("code")
    kind = code if isinstance(code, str) and code else error.get("type") or "error"
    message = error.get("message") or ""
    return str(kind), short(str(message))


def status_error(name: str, status: int, reason: str, raw: bytes, retries: int) -> ProviderError:
    """An error response as the call's error: its ``status``, ``reason`` phrase and ``raw``
    body (JSON in OpenAI's shape or a cousin's, or any text: an HTML page from a proxy), and
    the ``retries`` it took. :class:`ProviderUnavailable` for 401, 403 and 404."""
    after = after_retries(retries)
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if isinstance(body, dict) and (body.get("error") or body.get("message")):
        kind, message = error_fields(body)
        text = f"{name}: {status} {kind}: {message}{after}"
    else:
        detail = short(raw.decode("utf-8", errors="replace"), 200)
        text = f"{name}: {status} {reason or 'error'}{': ' + detail if detail else ''}{after}"
    if status in _UNAVAILABLE_STATUSES:
        return ProviderUnavailable(text)
    return ProviderError(text)




def embeddings_of(name: str, raw: bytes, count: int) -> list[list[float]]:
    """The vectors of an ``/embeddings`` answer (``{"data": [{"index", "embedding"}]}``), in
    the order of the ``count`` inputs.

    Raises:
        ProviderError: the answer is not one vector of numbers for each input.
    """
    try:
        data = json.loads(raw)["data"]
        vectors = [[float(x) for x in item["embedding"]] for item in sorted(data, key=lambda item: item.get("index", 0))]
    except (ValueError, TypeError, KeyError) as exc:
        raise ProviderError(f"{name}: the embeddings answer cannot be read ({short(str(exc))})") from None
    if len(vectors) != count or not all(vectors) or len({len(v) for v in vectors}) != 1:
        raise ProviderError(f"{name}: the embeddings answer has no vector of one length for each of {count} inputs")
    return vectors
