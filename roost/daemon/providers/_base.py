"""The one seam between the loop and a model vendor: :class:`Provider`.

A provider turns a :class:`ModelRequest` into live deltas (through a callback) and one
complete :class:`ModelReply`. Content blocks are the provider-neutral maps the loop keeps in
its history: ``{"type": "text", "text"}``, ``{"type": "tool_use", "id", "name", "input"}``,
``{"type": "thinking", "thinking", "signature"}``, and in user messages ``{"type":
"tool_result", "tool_use_id", "content", "is_error"}`` (``content`` a string, or a list of
text and media blocks). A media block is ``{"type": "image" | "document" | "audio",
"media_type", "sha256", "bytes", "data"}`` (``data`` base64, put in by the daemon just
before the call; images also have ``width`` and ``height``); each provider sends what its
API takes and says what it leaves out in a text note. A reply may also hold what a provider
ran itself (Anthropic's ``server_tool_use`` and ``web_search_tool_result``, text with
``citations``): kept as the provider sent them, and sent back to it so.

Exception tree::

    ProviderError          the call failed for good (after retries); .message says why
    └── ProviderUnavailable  the provider cannot be used at all (no key, unknown model)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

#: ``on_delta(kind, text)``: kind is ``"text"`` or ``"reasoning"``. Must not block.
DeltaCallback = Callable[[str, str], None]

#: Output tokens a reply may have when the call does not say.
MAX_TOKENS = 8192


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it."""

    name: str
    description: str
    input_schema: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class WebSearch:
    """The provider's own web search, offered with a call (Anthropic's server tool: the
    provider runs each search within the reply; nothing runs here)."""

    #: Searches one call may make.
    max_uses: int = 5
    #: Only these domains' results (empty: any), or never these (not both).
    allowed_domains: tuple[str, ...] = ()
    blocked_domains: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One model call."""

    #: The model's name at its provider (``claude-sonnet-4-5``, not ``anthropic/...``).
    model: str
    #: The system prompt: what stays the same from call to call (a provider caches it),
    #: then ``system_tail``, what changes between runs or within one.
    system: str
    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[ToolSpec, ...] = ()
    max_tokens: int = MAX_TOKENS
    #: The session's working directory (the scripted provider resolves paths from it).
    cwd: str = "."
    #: Thinking budget in tokens (None: no extended thinking). Anthropic sends it as
    #: ``thinking.budget_tokens``; OpenAI-compatible servers get a ``reasoning_effort``.
    think: int | None = None
    #: What the call is for: a ``turn`` of the agent, or the ``summary`` of a compaction;
    #: and its number in the session (turns: replies so far in the whole history, which a
    #: compacted request no longer shows; summaries: compactions so far). Providers that
    #: talk to a real model ignore both; the scripted one picks its response by them.
    purpose: str = "turn"
    number: int | None = None
    #: The provider's web search, offered beside ``tools`` (None: not offered).
    web_search: WebSearch | None = None
    system_tail: str = ""

    @property
    def system_text(self) -> str:
        """The whole system prompt, as one text."""
        return "\n\n".join(p for p in (self.system, self.system_tail) if p)


@dataclass(frozen=True, slots=True)
class ModelReply:
    """A complete reply: content blocks, why it stopped, and tokens used; and how the call
    went: the retries it took, and seconds from the call to the first of the reply's content
    (text, thinking or a tool call; None: the provider cannot tell)."""

    content: tuple[Mapping[str, Any], ...]
    stop_reason: str
    usage: Mapping[str, int] = field(default_factory=dict)
    retries: int = 0
    first_token: float | None = None


class ProviderError(Exception):
    """A model call failed for good; the run ends with reason ``error`` and this message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ProviderUnavailable(ProviderError):
    """The provider cannot serve this model at all (unknown, or no API key)."""


class Provider(Protocol):
    """A model vendor. One instance per provider, shared by every session."""

    async def stream(self, request: ModelRequest, on_delta: DeltaCallback) -> ModelReply:
        """Call the model, report deltas as they arrive, return the complete reply.

        Error handling:
            Raises :class:`ProviderError` once retries are exhausted. Cancellation closes
            the underlying stream at once.
        """
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...
