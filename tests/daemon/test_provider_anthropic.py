"""AnthropicProvider against the fake Messages API server (real SDK, real sockets)."""

from __future__ import annotations

import copy
import json
import socket
import subprocess
import sys
from contextlib import ExitStack
from dataclasses import replace
from typing import Any, AsyncIterator, Callable

import pytest
import trio

from roost.daemon.providers._anthropic import AnthropicProvider
from roost.daemon.providers._anthropic_wire import request_params as _request_params
from roost.daemon.providers._sse import SSEDecoder
from roost.daemon.providers._base import (
    ModelReply,
    ModelRequest,
    ProviderError,
    ProviderUnavailable,
    ToolSpec,
)
from tests.fakes.anthropic_server import TRANSCRIPTS, FakeAnthropicServer, serve_anthropic

KEY = "sk-ant-test-123"
MODEL = "claude-test"  # not in the SDK's deprecated list, which would warn (= error here)
HI = ModelRequest(model=MODEL, system="be brief", messages=({"role": "user", "content": "hi"},))
FAST_RETRY = {"retry-after": "0.01"}  # the SDK honours fractional seconds; 0 means its own backoff
EPHEMERAL = {"type": "ephemeral"}

Start = Callable[..., tuple[FakeAnthropicServer, AnthropicProvider]]


@pytest.fixture
async def start() -> AsyncIterator[Start]:
    """``start(script, **provider_kwargs) -> (server, provider)``; both closed at teardown."""
    providers: list[AnthropicProvider] = []
    with ExitStack() as stack:

        def _start(script: list[dict[str, Any]], **kwargs: Any):
            server = stack.enter_context(serve_anthropic(script))
            kwargs.setdefault("api_key", KEY)
            provider = AnthropicProvider(base_url=server.base_url, **kwargs)
            providers.append(provider)
            return server, provider

        try:
            yield _start
        finally:
            for provider in providers:
                await provider.aclose()


class Deltas(list):
    def __call__(self, kind: str, text: str) -> None:
        self.append((kind, text))


def reply(*content: dict[str, Any], stop_reason: str = "end_turn", **extra: Any) -> dict[str, Any]:
    return {"content": list(content), "stop_reason": stop_reason, **extra}


# -- streaming and the reply ------------------------------------------------------------------


async def test_text_deltas_reach_on_delta_in_order(start: Start) -> None:
    pieces = ["Hel", "lo, ", "wor", "ld", "!"]
    server, provider = start([reply({"type": "text", "deltas": pieces})])
    deltas = Deltas()

    result = await provider.stream(HI, deltas)

    assert deltas == [("text", p) for p in pieces]
    assert result.first_token is not None and result.first_token > 0
    assert replace(result, first_token=None) == ModelReply(
        content=({"type": "text", "text": "Hello, world!"},),
        stop_reason="end_turn",
        usage={"input_tokens": 10, "output_tokens": 5},
    )


async def test_request_is_built_from_the_neutral_request(start: Start) -> None:
    server, provider = start([reply({"type": "text", "text": "ok"})])
    request = ModelRequest(
        model=MODEL,
        system="You are roost.",
        messages=(
            {"role": "user", "content": [{"type": "text", "text": "read a.txt"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": ""},  # empty text: the API rejects it, so dropped
                {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.txt"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "no such file",
                 "is_error": True},
            ]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {"path": "b.txt"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "B", "is_error": False},
            ]},
        ),
        tools=(ToolSpec("read", "Read a file.", {"type": "object",
                                                 "properties": {"path": {"type": "string"}}}),),
        max_tokens=1234,
    )

    await provider.stream(request, Deltas())

    body = server.requests[0].body
    assert server.requests[0].path == "/v1/messages"
    assert body["model"] == MODEL
    assert body["max_tokens"] == 1234
    assert body["stream"] is True
    assert body["system"] == [{"type": "text", "text": "You are roost.",
                               "cache_control": EPHEMERAL}]
    assert body["tools"] == [{"name": "read", "description": "Read a file.",
                              "input_schema": {"type": "object",
                                               "properties": {"path": {"type": "string"}}},
                              "cache_control": EPHEMERAL}]
    assert "thinking" not in body
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "read a.txt"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.txt"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "no such file",
             "is_error": True},
        ]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {"path": "b.txt"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "B",
             "cache_control": EPHEMERAL},
        ]},
    ]


async def test_no_system_and_no_tools_are_left_out(start: Start) -> None:
    server, provider = start([reply({"type": "text", "text": "ok"})])
    await provider.stream(ModelRequest(model=MODEL, system="", messages=HI.messages), Deltas())
    body = server.requests[0].body
    assert "system" not in body and "tools" not in body


async def test_tool_use_input_is_assembled_from_json_chunks(start: Start) -> None:
    args = {"path": "src/é.py", "lines": [1, 20], "opts": {"follow": True, "note": "a \"q\""}}
    text = json.dumps(args)
    # Uneven pieces, cutting through strings, escapes and numbers.
    parts = ["", text[:3], text[3:11], text[11:12], text[12:30], text[30:]]
    server, provider = start([reply(
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_9", "name": "read", "partial_json": parts},
        {"type": "tool_use", "id": "toolu_10", "name": "list", "partial_json": [""]},
        stop_reason="tool_use",
    )])
    deltas = Deltas()

    result = await provider.stream(HI, deltas)

    assert result.stop_reason == "tool_use"
    assert result.content == (
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_9", "name": "read", "input": args},
        {"type": "tool_use", "id": "toolu_10", "name": "list", "input": {}},
    )
    assert all(kind == "text" for kind, _ in deltas)  # tool JSON is not reported as deltas


async def test_tool_use_with_broken_json_is_a_provider_error(start: Start) -> None:
    server, provider = start([reply(
        {"type": "tool_use", "id": "toolu_1", "name": "read", "partial_json": ["{\"pa", "th"]},
        stop_reason="tool_use",
    )])
    with pytest.raises(ProviderError, match="'read' input is not JSON"):
        await provider.stream(HI, Deltas())


async def test_thinking_comes_back_with_signature_and_is_sent_back_unchanged(
    start: Start,
) -> None:
    server, provider = start([
        reply(
            {"type": "thinking", "deltas": ["The user ", "wants a ", "file."],
             "signature": "EqQBCkYIARgCKkD+sig=="},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
            {"type": "text", "text": "Reading it."},
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
            stop_reason="tool_use",
        ),
        reply({"type": "text", "text": "Done."}),
    ])
    deltas = Deltas()

    first = await provider.stream(HI, deltas)

    thinking = {"type": "thinking", "thinking": "The user wants a file.",
                "signature": "EqQBCkYIARgCKkD+sig=="}
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}
    assert first.content[:2] == (thinking, redacted)
    assert deltas[:3] == [("reasoning", "The user "), ("reasoning", "wants a "),
                          ("reasoning", "file.")]
    assert deltas[3:] == [("text", "Reading "), ("text", "it.")]  # the fake's 8-char pieces

    second = ModelRequest(model=MODEL, system="be brief", messages=(
        *HI.messages,
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1",
                                      "content": "A"}]},
    ))
    await provider.stream(second, Deltas())

    sent = server.requests[1].body["messages"][1]["content"]
    assert sent == [thinking, redacted, {"type": "text", "text": "Reading it."},
                    {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}}]


async def test_usage_includes_cache_tokens(start: Start) -> None:
    usage = {"input_tokens": 12, "output_tokens": 34, "cache_read_input_tokens": 5000,
             "cache_creation_input_tokens": 700}
    server, provider = start([reply({"type": "text", "text": "ok"}, usage=usage)])
    result = await provider.stream(HI, Deltas())
    assert result.usage == usage
    assert all(type(v) is int for v in result.usage.values())


async def test_usage_leaves_out_absent_cache_counts(start: Start) -> None:
    server, provider = start([reply({"type": "text", "text": "ok"},
                                    usage={"input_tokens": 3, "output_tokens": 4})])
    result = await provider.stream(HI, Deltas())
    assert result.usage == {"input_tokens": 3, "output_tokens": 4}


@pytest.mark.parametrize(
    "stop_reason",
    ["end_turn", "tool_use", "max_tokens", "stop_sequence", "refusal", "pause_turn"],
)
async def test_stop_reason_is_passed_through(start: Start, stop_reason: str) -> None:
    extra = {"stop_sequence": "###"} if stop_reason == "stop_sequence" else {}
    server, provider = start([reply({"type": "text", "text": "partial"},
                                    stop_reason=stop_reason, **extra)])
    result = await provider.stream(HI, Deltas())
    assert result.stop_reason == stop_reason
    assert result.content == ({"type": "text", "text": "partial"},)


# -- extended thinking -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("think", "max_tokens", "budget", "sent_max_tokens"),
    [
        (2000, 8192, 2000, 8192),     # fits: sent as is
        (500, 8192, 1024, 8192),      # below the API's minimum: raised to 1024
        (1, 8192, 1024, 8192),
        (8192, 8192, 8192, 16384),    # max_tokens must be above the budget, not equal
        (10000, 4096, 10000, 14096),  # budget + the room the caller asked for
        (2000, 1000, 2000, 3000),
    ],
)
async def test_think_becomes_a_thinking_budget_below_max_tokens(
    start: Start, think: int, max_tokens: int, budget: int, sent_max_tokens: int,
) -> None:
    server, provider = start([reply({"type": "text", "text": "ok"})])
    request = ModelRequest(model=MODEL, system="s", messages=HI.messages, max_tokens=max_tokens,
                           think=think)
    await provider.stream(request, Deltas())
    body = server.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] == sent_max_tokens
    assert body["max_tokens"] > body["thinking"]["budget_tokens"]


@pytest.mark.parametrize("think", [None, 0, -5])
async def test_no_think_sends_no_thinking(start: Start, think: int | None) -> None:
    server, provider = start([reply({"type": "text", "text": "ok"})])
    request = ModelRequest(model=MODEL, system="s", messages=HI.messages, max_tokens=1000,
                           think=think)
    await provider.stream(request, Deltas())
    body = server.requests[0].body
    assert "thinking" not in body
    assert body["max_tokens"] == 1000


# -- prompt caching -----------------------------------------------------------------------------


def cache_marks(value: Any, path: str = "") -> list[str]:
    """Where ``cache_control`` appears in a request body, as paths like ``tools.1``."""
    found: list[str] = []
    if isinstance(value, dict):
        if "cache_control" in value:
            assert value["cache_control"] == EPHEMERAL
            found.append(path)
        for key, item in value.items():
            found += cache_marks(item, f"{path}.{key}".lstrip("."))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += cache_marks(item, f"{path}.{i}".lstrip("."))
    return found


def without_marks(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_marks(v) for v in value]
    return value


TOOLS = (
    ToolSpec("read", "Read a file.", {"type": "object",
                                      "properties": {"path": {"type": "string"}}}),
    ToolSpec("bash", "Run a command.", {"type": "object",
                                        "properties": {"command": {"type": "string"}}}),
)


async def test_cache_breakpoints_on_last_tool_system_and_last_block(start: Start) -> None:
    server, provider = start([reply({"type": "text", "text": "ok"})])
    messages = (
        {"role": "user", "content": "read a"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "hm", "signature": "sig"},
            {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"},
            {"type": "text", "text": "and now b"},
        ]},
    )
    request = ModelRequest(model=MODEL, system="You are roost.", messages=messages, tools=TOOLS)
    before = copy.deepcopy(request.messages)

    await provider.stream(request, Deltas())

    body = server.requests[0].body
    assert cache_marks(body) == ["messages.2.content.1", "system.0", "tools.1"]
    assert len(cache_marks(body)) <= 4  # the API's limit
    assert body["system"] == [{"type": "text", "text": "You are roost.",
                               "cache_control": EPHEMERAL}]
    assert body["messages"][2]["content"][1] == {"type": "text", "text": "and now b",
                                                 "cache_control": EPHEMERAL}
    assert request.messages == before  # marked on the copies sent, not on the history


async def test_a_string_last_message_becomes_a_marked_text_block(start: Start) -> None:
    server, provider = start([reply({"type": "text", "text": "ok"})])
    await provider.stream(HI, Deltas())
    body = server.requests[0].body
    assert cache_marks(body) == ["messages.0.content.0", "system.0"]  # no tools: 2 marks
    assert body["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "hi", "cache_control": EPHEMERAL}]}]
    assert HI.messages == ({"role": "user", "content": "hi"},)


def test_cache_mark_skips_thinking_and_drops_marks_from_elsewhere() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "iVBORw0KGgo="},
             "cache_control": EPHEMERAL}  # a mark we did not place: dropped
    request = ModelRequest(model=MODEL, system="", messages=(
        {"role": "user", "content": [image, {"type": "text", "text": "what is it?"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "It is"},
            {"type": "thinking", "thinking": "hm", "signature": "sig"},
            {"type": "redacted_thinking", "data": "abc"},
        ]},
    ))
    params = _request_params(request)
    # Thinking blocks cannot carry cache_control: the last block that can is marked.
    assert cache_marks(params) == ["messages.1.content.0"]
    assert "cache_control" in image  # the request's own block is left alone


async def test_a_long_session_reads_its_history_from_the_cache(start: Start) -> None:
    turns = [
        ({"input_tokens": 20, "output_tokens": 30, "cache_creation_input_tokens": 5000,
          "cache_read_input_tokens": 0}, "toolu_1"),
        ({"input_tokens": 3, "output_tokens": 25, "cache_creation_input_tokens": 90,
          "cache_read_input_tokens": 5000}, "toolu_2"),
        ({"input_tokens": 3, "output_tokens": 10, "cache_creation_input_tokens": 70,
          "cache_read_input_tokens": 5090}, None),
    ]
    script = [
        reply({"type": "text", "text": "done"}, usage=usage) if tool_id is None else
        reply({"type": "tool_use", "id": tool_id, "name": "bash", "input": {"command": "ls"}},
              stop_reason="tool_use", usage=usage)
        for usage, tool_id in turns
    ]
    server, provider = start(script)
    history: list[Any] = [{"role": "user", "content": "list the files, twice"}]
    usages = []
    for _ in turns:
        request = ModelRequest(model=MODEL, system="You are roost. " * 200,
                               messages=tuple(history), tools=TOOLS)
        result = await provider.stream(request, Deltas())
        usages.append(result.usage)
        history.append({"role": "assistant", "content": result.content})
        for block in result.content:
            if block["type"] == "tool_use":
                history.append({"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": block["id"], "content": "a b c"}]})

    assert usages == [usage for usage, _ in turns]  # the server's counts, mapped as sent
    bodies = [r.body for r in server.requests]
    for body in bodies:
        last = len(body["messages"]) - 1
        marks = cache_marks(body)
        assert marks == [f"messages.{last}.content.0", "system.0", "tools.1"]
    # Each request starts with the previous one, marks aside: the cached prefix is reusable.
    for before, after in zip(bodies, bodies[1:]):
        previous = without_marks(before)
        assert without_marks(after)["messages"][:len(previous["messages"])] == previous["messages"]
        assert without_marks(after)["system"] == previous["system"]
        assert without_marks(after)["tools"] == previous["tools"]


# -- transcripts: SSE bodies shaped as Anthropic documents them ---------------------------------
#
# tests/fakes/transcripts/anthropic_text.sse, anthropic_tool_use.sse and anthropic_thinking.sse
# are the examples of Anthropic's "Streaming Messages" page (the thinking signature, elided
# there, is completed); anthropic_parallel_tools.sse has the usage of today's API, with cache
# counts, the nested cache_creation object and service_tier.


async def test_text_transcript(start: Start) -> None:
    server, provider = start([{"transcript": "anthropic_text.sse"}])
    deltas = Deltas()
    result = await provider.stream(HI, deltas)
    assert deltas == [("text", "Hello"), ("text", "!")]
    assert replace(result, first_token=None) == ModelReply(content=({"type": "text", "text": "Hello!"},),
                                stop_reason="end_turn",
                                usage={"input_tokens": 25, "output_tokens": 15})


async def test_tool_use_transcript(start: Start) -> None:
    server, provider = start([{"transcript": "anthropic_tool_use.sse"}])
    deltas = Deltas()
    result = await provider.stream(HI, deltas)
    text = "Okay, let's check the weather for San Francisco, CA:"
    assert "".join(t for _, t in deltas) == text
    assert {kind for kind, _ in deltas} == {"text"}
    assert result.stop_reason == "tool_use"
    assert result.content == (
        {"type": "text", "text": text},
        {"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "get_weather",
         "input": {"location": "San Francisco, CA", "unit": "fahrenheit"}},
    )
    assert result.usage == {"input_tokens": 472, "output_tokens": 89}


async def test_parallel_tools_transcript_with_cache_usage(start: Start) -> None:
    server, provider = start([{"transcript": "anthropic_parallel_tools.sse"}])
    result = await provider.stream(HI, Deltas())
    assert result.stop_reason == "tool_use"
    assert result.content == (
        {"type": "text", "text": "I'll check the weather in both cities."},
        {"type": "tool_use", "id": "toolu_01HpVbD3LnWq8tKy2mRz6sUe", "name": "get_weather",
         "input": {"location": "Paris, France"}},
        {"type": "tool_use", "id": "toolu_01Xq4NfT7cJrGm9wAe2yBk5D", "name": "get_weather",
         "input": {"location": "Tokyo, Japan", "unit": "celsius"}},
    )
    assert result.usage == {"input_tokens": 37, "output_tokens": 118,
                            "cache_read_input_tokens": 4830,
                            "cache_creation_input_tokens": 312}


def transcript_thinking() -> tuple[str, str]:
    """The thinking text and signature of anthropic_thinking.sse, read without the provider."""
    thinking, signature = [], ""
    for line in (TRANSCRIPTS / "anthropic_thinking.sse").read_text("utf-8").splitlines():
        if line.startswith("data: "):
            delta = json.loads(line[6:]).get("delta", {})
            if delta.get("type") == "thinking_delta":
                thinking.append(delta["thinking"])
            elif delta.get("type") == "signature_delta":
                signature = delta["signature"]
    return "".join(thinking), signature


async def test_thinking_transcript_and_its_signature_round_trip_byte_for_byte(
    start: Start,
) -> None:
    server, provider = start([{"transcript": "anthropic_thinking.sse"},
                              reply({"type": "text", "text": "You're welcome."})])
    thinking, signature = transcript_thinking()
    assert "×" in thinking and "\n" in thinking and "+" in signature and "/" in signature
    request = ModelRequest(model=MODEL, system="s", think=2048, messages=(
        {"role": "user", "content": "What is the GCD of 1071 and 462?"},))
    deltas = Deltas()

    first = await provider.stream(request, deltas)

    answer = "The greatest common divisor of 1071 and 462 is **21**."
    assert [kind for kind, _ in deltas] == ["reasoning", "reasoning", "text"]
    assert "".join(t for k, t in deltas if k == "reasoning") == thinking
    assert first.content == ({"type": "thinking", "thinking": thinking, "signature": signature},
                             {"type": "text", "text": answer})
    assert first.stop_reason == "end_turn"
    assert first.usage == {}  # the documented example carries no usage

    second = ModelRequest(model=MODEL, system="s", think=2048, messages=(
        *request.messages,
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": "thanks"},
    ))
    await provider.stream(second, Deltas())

    sent = server.requests[1].body["messages"][1]["content"][0]
    assert sent == {"type": "thinking", "thinking": thinking, "signature": signature}
    assert sent["signature"].encode() == signature.encode()
    assert sent["thinking"].encode() == thinking.encode()


# -- errors and retries -------------------------------------------------------------------------


async def test_overloaded_then_success_is_retried(start: Start) -> None:
    server, provider = start([
        {"status": 529, "headers": FAST_RETRY},
        reply({"type": "text", "text": "made it"}),
    ])
    result = await provider.stream(HI, Deltas())
    assert result.content == ({"type": "text", "text": "made it"},)
    assert len(server.requests) == 2 and result.retries == 1
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1"]
    assert server.requests[0].body == server.requests[1].body


async def test_rate_limit_then_success_is_retried(start: Start) -> None:
    server, provider = start([
        {"status": 429, "headers": FAST_RETRY},
        {"status": 500, "headers": FAST_RETRY},
        reply({"type": "text", "text": "ok"}),
    ])
    result = await provider.stream(HI, Deltas())
    assert len(server.requests) == 3 and result.retries == 2


async def test_always_overloaded_fails_after_the_retries(start: Start) -> None:
    server, provider = start([{"status": 529, "headers": FAST_RETRY}] * 3, max_retries=2)
    with pytest.raises(ProviderError) as info:
        await provider.stream(HI, Deltas())
    assert info.value.message == "anthropic: 529 overloaded_error: Overloaded (after 2 retries)"
    assert not isinstance(info.value, ProviderUnavailable)
    assert len(server.requests) == 3


async def test_max_retries_zero_fails_at_once(start: Start) -> None:
    server, provider = start([{"status": 529}], max_retries=0)
    with pytest.raises(ProviderError, match=r"^anthropic: 529 overloaded_error: Overloaded$"):
        await provider.stream(HI, Deltas())
    assert len(server.requests) == 1


async def test_invalid_request_is_not_retried(start: Start) -> None:
    message = "max_tokens: 999999 > 64000, which is the maximum allowed"
    server, provider = start([
        {"status": 400, "error": {"type": "invalid_request_error", "message": message}},
        reply({"type": "text", "text": "never served"}),
    ])
    with pytest.raises(ProviderError) as info:
        await provider.stream(HI, Deltas())
    assert info.value.message == f"anthropic: 400 invalid_request_error: {message}"
    assert not isinstance(info.value, ProviderUnavailable)
    assert len(server.requests) == 1


@pytest.mark.parametrize("status", [401, 403, 404])
async def test_bad_key_or_unknown_model_is_unavailable(start: Start, status: int) -> None:
    server, provider = start([{"status": status}])
    with pytest.raises(ProviderUnavailable, match=rf"^anthropic: {status} \w+_error: "):
        await provider.stream(HI, Deltas())
    assert len(server.requests) == 1


async def test_rate_limit_honours_retry_after(start: Start) -> None:
    server, provider = start([
        {"status": 429, "headers": {"retry-after": "1"}},
        reply({"type": "text", "text": "ok"}),
    ])
    began = trio.current_time()
    result = await provider.stream(HI, Deltas())
    waited = trio.current_time() - began
    assert result.content == ({"type": "text", "text": "ok"},)
    assert len(server.requests) == 2
    # The server's 1 s: the SDK's own backoff for a first retry is 0.375-0.5 s. (A lower
    # bound only: a loaded machine makes waits longer, never shorter.)
    assert waited >= 1.0


async def test_server_error_then_success_is_retried(start: Start) -> None:
    server, provider = start([
        {"status": 500, "headers": FAST_RETRY},
        reply({"type": "text", "text": "second time lucky"}),
    ])
    result = await provider.stream(HI, Deltas())
    assert result.content == ({"type": "text", "text": "second time lucky"},)
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1"]


_START = ('event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1",'
          '"type":"message","role":"assistant","content":[],"model":"claude-test",'
          '"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1}}}'
          '\n\n')
_TEXT_START = ('event: content_block_start\ndata: {"type":"content_block_start","index":0,'
               '"content_block":{"type":"text","text":""}}\n\n')
_HELLO = ('event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
          '"delta":{"type":"text_delta","text":"Hello"}}\n\n')


@pytest.mark.parametrize(
    ("sse", "message", "reported"),
    [
        pytest.param('event: message_start\ndata: {"type":"message_start","message":\n\n',
                     r"^anthropic: malformed message_start event \(JSONDecodeError: ",
                     [], id="bad-json-first"),
        pytest.param(_START + _TEXT_START + _HELLO
                     + 'event: content_block_delta\ndata: {"type":"content_block_delta",'
                       '"index":0,"delta":{"type":"text_delta","text":"wor\n\n' + _HELLO,
                     r"^anthropic: malformed content_block_delta event \(JSONDecodeError: ",
                     [("text", "Hello")], id="bad-json-midway"),
        pytest.param(_START + _TEXT_START
                     + 'event: content_block_delta\ndata: {"type":"content_block_delta",'
                       '"index":0}\n\n',
                     r"^anthropic: malformed content_block_delta event \(KeyError: 'delta'\)$",
                     [], id="missing-field"),
        pytest.param("<html><body>502 Bad Gateway</body></html>\n",
                     r"^anthropic: stream ended before message_stop$", [], id="not-sse"),
    ],
)
async def test_malformed_sse_is_a_provider_error(
    start: Start, sse: str, message: str, reported: list[tuple[str, str]],
) -> None:
    server, provider = start([{"sse": sse}, {"transcript": "anthropic_text.sse"}])
    deltas = Deltas()
    with pytest.raises(ProviderError, match=message):
        await provider.stream(HI, deltas)
    assert deltas == reported
    assert len(server.requests) == 1  # not retried
    # The client is still usable.
    assert (await provider.stream(HI, Deltas())).content == ({"type": "text", "text": "Hello!"},)


@pytest.mark.parametrize(
    ("turn", "message"),
    [
        # Not even the status line before the timeout.
        pytest.param({"first_byte_after": 30, **reply({"type": "text", "text": "late"})},
                     r"^anthropic: request timed out$", id="no-headers"),
        # Headers, then nothing: the first SSE byte is late.
        pytest.param(reply({"type": "text", "text": "late"}, stall_after=0),
                     r"^anthropic: stream timed out waiting for data \(ReadTimeout\)$",
                     id="no-body"),
    ],
)
async def test_slow_first_byte_past_the_timeout(
    start: Start, turn: dict[str, Any], message: str,
) -> None:
    server, provider = start([turn], timeout=0.2, max_retries=0)
    began = trio.current_time()
    with pytest.raises(ProviderError, match=message):
        await provider.stream(HI, Deltas())
    # Well under the server's delay (30 s, or a stall with no end): the timeout fired.
    assert 0.2 <= trio.current_time() - began < 10.0


async def test_slow_first_byte_is_retried_then_fails_clearly(start: Start) -> None:
    slow = {"first_byte_after": 30, **reply({"type": "text", "text": "late"})}
    server, provider = start([slow, slow], timeout=0.2, max_retries=1)
    with pytest.raises(ProviderError, match=r"^anthropic: request timed out \(after 1 retry\)$"):
        await provider.stream(HI, Deltas())
    assert len(server.requests) == 2


async def test_stream_cut_midway_is_a_provider_error(start: Start) -> None:
    server, provider = start([
        reply({"type": "text", "deltas": ["one ", "two ", "three"]}, cut_after=5),
        reply({"type": "text", "text": "again"}),
    ])
    deltas = Deltas()
    with pytest.raises(ProviderError, match="^anthropic: stream cut off"):
        await provider.stream(HI, deltas)
    assert deltas == [("text", "one "), ("text", "two ")]  # message_start, ping, start, 2 deltas
    assert len(server.requests) == 1  # never retried once the stream has begun
    # The client is still usable.
    assert (await provider.stream(HI, Deltas())).content == ({"type": "text", "text": "again"},)


async def test_stream_ending_without_message_stop_is_a_provider_error(start: Start) -> None:
    # The body ends cleanly (terminating chunk) after the deltas, with no message_stop.
    server, provider = start([reply({"type": "text", "deltas": ["a", "b"]}, end_after=5)])
    deltas = Deltas()
    with pytest.raises(ProviderError, match="^anthropic: stream ended before message_stop$"):
        await provider.stream(HI, deltas)
    assert deltas == [("text", "a"), ("text", "b")]


async def test_error_event_inside_the_stream_is_a_provider_error(start: Start) -> None:
    server, provider = start([
        reply({"type": "text", "deltas": ["a", "b"]}, error_after=4),
        reply({"type": "text", "text": "next"}),
    ])
    deltas = Deltas()
    with pytest.raises(
        ProviderError, match="^anthropic: overloaded_error during the stream: Overloaded$"
    ):
        await provider.stream(HI, deltas)
    assert deltas == [("text", "a")]
    assert len(server.requests) == 1  # not retried
    assert (await provider.stream(HI, Deltas())).content == ({"type": "text", "text": "next"},)


async def test_stalled_stream_times_out(start: Start) -> None:
    server, provider = start([reply({"type": "text", "text": "slow"}, stall_after=3)],
                             timeout=0.2, max_retries=0)
    with pytest.raises(ProviderError, match="^anthropic: stream timed out"):
        await provider.stream(HI, Deltas())


async def test_unreachable_server_is_a_provider_error() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = AnthropicProvider(KEY, f"http://127.0.0.1:{port}", max_retries=0)
    try:
        with pytest.raises(ProviderError, match=rf"^anthropic: cannot reach http://127.0.0.1:{port}"):
            await provider.stream(HI, Deltas())
    finally:
        await provider.aclose()


async def test_cancellation_mid_stream_propagates_promptly(start: Start) -> None:
    server, provider = start([
        reply({"type": "text", "deltas": ["first", "never"]}, stall_after=4),
        reply({"type": "text", "text": "after"}),
    ])
    deltas = Deltas()
    began = trio.current_time()

    # Cancelled once the first delta is in, however long a loaded machine took to get there.
    with trio.CancelScope() as scope:

        def on_delta(kind: str, text: str) -> None:
            deltas(kind, text)
            scope.cancel()

        await provider.stream(HI, on_delta)

    assert scope.cancelled_caught
    # The stall has no end: returning at all shows the cancellation closed the stream.
    assert trio.current_time() - began < 10.0
    assert deltas == [("text", "first")]
    # The client is still usable after the cancelled stream.
    assert (await provider.stream(HI, Deltas())).content == ({"type": "text", "text": "after"},)


async def test_cancelled_stream_has_reported_everything_that_arrived(start: Start) -> None:
    # Many small events, so that they arrive over several reads, some holding many events;
    # the stall comes after the last delta, before its block is closed.
    text = [f"word{i} " for i in range(300)]
    thinking = ["Let me ", "think ", "about ", "this."]
    content = [{"type": "thinking", "deltas": thinking, "signature": "c2ln"},
               {"type": "text", "deltas": text}]
    # message_start, ping, thinking start, its deltas, signature, stop, text start, its deltas
    sent_before_stall = 2 + 1 + len(thinking) + 1 + 1 + 1 + len(text)
    server, provider = start([reply(*content, stall_after=sent_before_stall)])
    deltas = Deltas()

    with trio.move_on_after(0.3) as scope:
        await provider.stream(HI, deltas)

    assert scope.cancelled_caught
    assert deltas == [("reasoning", t) for t in thinking] + [("text", t) for t in text]


async def test_cancellation_during_retry_backoff_propagates(start: Start) -> None:
    server, provider = start([{"status": 529, "headers": {"retry-after": "30"}}])
    with trio.move_on_after(0.2) as scope:
        await provider.stream(HI, Deltas())
    assert scope.cancelled_caught
    assert len(server.requests) == 1


# -- keys and construction ----------------------------------------------------------------------


async def test_missing_key_is_unavailable_at_construction() -> None:
    with pytest.raises(ProviderUnavailable, match="^ANTHROPIC_API_KEY is not set"):
        AnthropicProvider()
    # "" is a server that needs no key (api_key_env = ""): it builds.
    await AnthropicProvider(api_key="", base_url="http://127.0.0.1:9").aclose()


async def test_key_reaches_the_server(start: Start) -> None:
    server, provider = start([reply({"type": "text", "text": "ok"})])
    await provider.stream(HI, Deltas())
    headers = server.requests[0].headers
    assert headers.get("x-api-key") == KEY or headers.get("authorization") == f"Bearer {KEY}"
    assert "anthropic-version" in headers


async def test_key_and_base_url_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with serve_anthropic([reply({"type": "text", "text": "env"})]) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        provider = AnthropicProvider()
        try:
            result = await provider.stream(HI, Deltas())
        finally:
            await provider.aclose()
    assert result.content == ({"type": "text", "text": "env"},)
    headers = server.requests[0].headers
    assert (headers.get("x-api-key") == "sk-from-env"
            or headers.get("authorization") == "Bearer sk-from-env")


async def test_closed_provider_refuses_calls(start: Start) -> None:
    server, provider = start([])
    await provider.aclose()
    await provider.aclose()  # idempotent
    with pytest.raises(ProviderError, match="closed"):
        await provider.stream(HI, Deltas())
    assert server.requests == []


# -- the SSE decoder, without IO ----------------------------------------------------------------


def test_sse_decoder_handles_any_split_crlf_comments_and_multiline_data() -> None:
    wire = (": comment\r\nevent: ping\r\ndata: {}\r\n\r\n"
            "event: message_delta\ndata: {\"a\":\ndata:  \"é\"}\nid: 7\n\n"
            "data: no-name\n\n").encode()
    expected = [("ping", "{}"), ("message_delta", '{"a":\n "é"}'), ("message", "no-name")]
    for size in (1, 2, 7, len(wire)):
        decoder = SSEDecoder()
        events = []
        for i in range(0, len(wire), size):
            events += decoder.feed(wire[i:i + size])
        assert events == expected, size


# -- the fake server on its own -----------------------------------------------------------------


def test_fake_server_runs_as_a_separate_process(tmp_path: Any) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"status": 529}],
                                  "default": reply({"type": "text", "text": "bench"})}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.anthropic_server", "--port", "0",
         "--script", str(script)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:")
        statuses = []
        for _ in range(3):
            statuses.append(_post(base_url, {"model": MODEL, "max_tokens": 5, "messages": []}))
        assert [s for s, _ in statuses] == [529, 200, 200]
        assert statuses[1][1]["content"] == [{"type": "text", "text": "bench"}]
    finally:
        proc.terminate()
        proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == 0


def _post(base_url: str, body: dict[str, Any]) -> tuple[int, Any]:
    import http.client

    host, port = base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("POST", "/v1/messages", json.dumps(body),
                     {"content-type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


async def test_configured_headers_reach_the_server() -> None:
    with serve_anthropic([{"content": [{"type": "text", "text": "ok"}]}]) as server:
        provider = AnthropicProvider(api_key="k", base_url=server.base_url, headers={"x-team": "tools"})
        try:
            request = ModelRequest("claude-test", "", ({"role": "user", "content": "hi"},))
            await provider.stream(request, lambda kind, text: None)
        finally:
            await provider.aclose()
        assert server.requests[0].headers["x-team"] == "tools"
