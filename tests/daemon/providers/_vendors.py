"""Each streaming vendor as the provider tests see it: its fake server, its provider, how a
turn of its fake's script is written, and what its wire module would send.

The contract suite (test_contract.py) runs once per :class:`Vendor`; a vendor's own tests
override the ``vendor`` fixture with theirs. Indices of the fakes' knobs (``cut_after``,
``stall_after``, ...) count SSE events, and the vendors send a different number of events
before their first text delta: :attr:`Vendor.lead`.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from roost.daemon.providers._anthropic import AnthropicProvider
from roost.daemon.providers._anthropic_wire import AnthropicFold, request_params
from roost.daemon.providers._base import ModelReply, ModelRequest, Provider
from roost.daemon.providers._openai import OpenAIProvider
from roost.daemon.providers._openai_wire import OpenAIFold, request_body
from roost.daemon.providers._sse import SSEDecoder
from roost.daemon.providers._wire import json_body
from tests.fakes._http import TRANSCRIPTS, FakeServer, Turn
from tests.fakes.anthropic_server import serve_anthropic
from tests.fakes.openai_server import serve_openai

KEY = "sk-test-123"
#: Not in the Anthropic SDK's deprecated list, which would warn (= error here).
MODEL = "claude-test"
HI = ModelRequest(model=MODEL, system="be brief", messages=({"role": "user", "content": "hi"},))
#: The SDK honours fractional seconds; 0 would mean its own backoff.
FAST_RETRY = {"retry-after": "0.01"}

#: ``(id, name, argument pieces)`` of a tool call in a scripted reply.
Call = tuple[str, str, Sequence[str]]


class Deltas(list[tuple[str, str]]):
    """An ``on_delta`` that keeps what it is given."""

    def __call__(self, kind: str, text: str) -> None:
        self.append((kind, text))


Fold = AnthropicFold | OpenAIFold


def fold_events(fold: Fold, events: Iterable[tuple[str, str]], deltas: Deltas | None = None) -> Deltas:
    """Feed decoded events to ``fold``; the deltas they carried."""
    deltas = Deltas() if deltas is None else deltas
    for name, data in events:
        for delta in fold.feed(name, data):
            deltas(*delta)
    return deltas


def fold_sse(fold: Fold, raw: bytes, size: int | None = None) -> Deltas:
    """Feed SSE bytes (in ``size``-byte pieces; None: at once) through the decoder to
    ``fold``; the deltas they carried."""
    decoder = SSEDecoder()
    deltas = Deltas()
    size = size or len(raw) or 1
    for i in range(0, len(raw), size):
        fold_events(fold, decoder.feed(raw[i:i + size]), deltas)
    return deltas


def transcript(name: str) -> bytes:
    """The bytes of a recorded transcript in tests/fakes/transcripts/."""
    return (TRANSCRIPTS / name).read_bytes()


def read_transcript(fold: Fold, name: str) -> tuple[Deltas, ModelReply]:
    """A transcript folded alone: its deltas and its reply."""
    deltas = fold_sse(fold, transcript(name))
    return deltas, fold.reply()


@dataclass(frozen=True)
class Vendor:
    """A streaming vendor: its fake, its provider and its wire format, for the tests."""

    #: The provider's name: the first word of its error messages.
    name: str
    serve: Callable[..., contextlib.AbstractContextManager[FakeServer]]
    #: ``provider(base_url, **kwargs)`` with the test key and fast retries.
    provider: Callable[..., Provider]
    #: The path model calls go to, and what the fake's base URL ends in.
    path: str
    url_path: str
    #: SSE events the fake sends before a reply's first text delta.
    lead: int
    #: ``key_sent(headers, key)``: whether a request's headers carry the key.
    key_sent: Callable[[Mapping[str, str], str], bool]
    #: ``text(pieces, **knobs)``: a reply turn streaming these text deltas.
    text: Callable[..., Turn]
    #: ``tools(text, calls, **knobs)``: a reply turn with text, then tool calls.
    tools: Callable[..., Turn]
    #: ``error(status, code, message)``: an error turn with this code and message.
    error: Callable[[int, str, str], Turn]
    #: What the server receives for a request: the wire module's body, as JSON decodes it.
    body: Callable[[ModelRequest], Any]
    #: A fresh fold for this vendor's stream.
    fold: Callable[[], Fold]
    #: The recorded transcripts in this vendor's format.
    transcripts: tuple[str, ...]
    #: The module that runs the fake on its own (``python -m``).
    fake_module: str
    #: The text of the fake's whole (non-streamed) reply.
    reply_text: Callable[[Any], str]


def _anthropic_provider(base_url: str, **kwargs: Any) -> Provider:
    kwargs.setdefault("api_key", KEY)
    return AnthropicProvider(base_url=base_url, **kwargs)


def _anthropic_tools(text: str, calls: Sequence[Call], **knobs: Any) -> Turn:
    return {"content": [{"type": "text", "text": text},
                        *({"type": "tool_use", "id": i, "name": n, "partial_json": list(p)}
                          for i, n, p in calls)],
            "stop_reason": "tool_use", **knobs}


ANTHROPIC = Vendor(
    name="anthropic",
    serve=serve_anthropic,
    provider=_anthropic_provider,
    path="/v1/messages",
    url_path="",
    lead=3,  # message_start, ping, content_block_start
    # The SDK's versions differ in how they send it.
    key_sent=lambda headers, key: (headers.get("x-api-key") == key
                                   or headers.get("authorization") == f"Bearer {key}"),
    text=lambda pieces, **knobs: {"content": [{"type": "text", "deltas": list(pieces)}], **knobs},
    tools=_anthropic_tools,
    error=lambda status, code, message: {"status": status,
                                         "error": {"type": code, "message": message}},
    body=lambda request: json.loads(json_body(request_params(request))),
    fold=AnthropicFold,
    transcripts=("anthropic_text.sse", "anthropic_tool_use.sse", "anthropic_thinking.sse",
                 "anthropic_parallel_tools.sse"),
    fake_module="tests.fakes.anthropic_server",
    reply_text=lambda body: body["content"][0]["text"],
)


def _openai_provider(base_url: str, **kwargs: Any) -> Provider:
    kwargs.setdefault("api_key", KEY)
    kwargs.setdefault("retry_base", 0.01)
    return OpenAIProvider(base_url, **kwargs)


def _openai_tools(text: str, calls: Sequence[Call], **knobs: Any) -> Turn:
    return {"content": text,
            "tool_calls": [{"id": i, "name": n, "parts": list(p)} for i, n, p in calls], **knobs}


OPENAI = Vendor(
    name="openai",
    serve=serve_openai,
    provider=_openai_provider,
    path="/v1/chat/completions",
    url_path="/v1",
    lead=1,  # the chunk with the role
    key_sent=lambda headers, key: headers.get("authorization") == f"Bearer {key}",
    text=lambda pieces, **knobs: {"content": list(pieces), **knobs},
    tools=_openai_tools,
    error=lambda status, code, message: {"status": status,
                                         "error": {"message": message, "code": code}},
    body=lambda request: json.loads(json_body(request_body(request, "openai"))),
    fold=lambda: OpenAIFold("openai"),
    transcripts=("openai_text.sse", "openai_parallel_tools.sse"),
    fake_module="tests.fakes.openai_server",
    reply_text=lambda body: body["choices"][0]["message"]["content"],
)

VENDORS = (ANTHROPIC, OPENAI)
