"""OpenAIProvider against the fake Chat Completions server (real httpx2, real sockets)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from contextlib import ExitStack
from dataclasses import replace
from typing import Any, AsyncIterator, Callable

import pytest
import trio

from roost.daemon.providers import _openai
from roost.daemon.providers._base import (
    ModelReply,
    ModelRequest,
    ProviderError,
    ProviderUnavailable,
    ToolSpec,
)
from roost.daemon.providers._openai import OpenAIProvider
from roost.daemon.providers._openai_wire import OpenAIFold as _Fold
from roost.daemon.providers._sse import SSEDecoder
from tests.fakes.openai_server import FakeOpenAIServer, serve_openai, transcript_events

KEY = "sk-test-123"
MODEL = "gpt-test"
HI = ModelRequest(model=MODEL, system="be brief", messages=({"role": "user", "content": "hi"},))
FAST_RETRY = {"retry-after": "0.01"}

Start = Callable[..., tuple[FakeOpenAIServer, OpenAIProvider]]


@pytest.fixture
async def start() -> AsyncIterator[Start]:
    """``start(script, **provider_kwargs) -> (server, provider)``; both closed at teardown."""
    providers: list[OpenAIProvider] = []
    with ExitStack() as stack:

        def _start(script: list[dict[str, Any]], **kwargs: Any):
            server = stack.enter_context(serve_openai(script))
            kwargs.setdefault("api_key", KEY)
            kwargs.setdefault("retry_base", 0.01)
            provider = OpenAIProvider(server.base_url, **kwargs)
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


def call(id: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": args}


# -- the documented transcripts -----------------------------------------------------------------


async def test_text_transcript_streams_deltas_and_usage(start: Start) -> None:
    server, provider = start([{"transcript": "openai_text.sse"}])
    deltas = Deltas()

    result = await provider.stream(HI, deltas)

    pieces = ["Hello", "!", " How", " can", " I", " help", " you", " today", "?"]
    assert deltas == [("text", p) for p in pieces]
    assert result.first_token is not None and result.first_token > 0 and result.retries == 0
    assert replace(result, first_token=None) == ModelReply(
        content=({"type": "text", "text": "Hello! How can I help you today?"},),
        stop_reason="end_turn",
        usage={"input_tokens": 19, "output_tokens": 10, "cache_read_input_tokens": 0},
    )


async def test_parallel_tool_calls_transcript(start: Start) -> None:
    server, provider = start([{"transcript": "openai_parallel_tools.sse"}])
    deltas = Deltas()

    result = await provider.stream(HI, deltas)

    assert deltas == []  # tool arguments are not reported as deltas
    assert result.stop_reason == "tool_use"
    assert result.content == (
        call("call_Pn2tX0cG6mHq1rVb9sKe4WdA", "get_weather", {"location": "Paris, France"}),
        call("call_7JcR3vUy5QeT8nLw2aZf0XmB", "get_weather", {"location": "Bogotá, Colombia"}),
        call("call_Ka9sD4fG1hJ6kL3zX8cV5bNm", "send_email",
             {"to": "bob@email.com", "body": "Hi bob\n"}),
    )
    # prompt_tokens (143) counts the cached tokens (128); input_tokens does not.
    assert result.usage == {"input_tokens": 15, "output_tokens": 62,
                            "cache_read_input_tokens": 128}


def test_transcripts_are_shaped_as_documented() -> None:
    for name in ("openai_text.sse", "openai_parallel_tools.sse"):
        events = transcript_events(name)
        assert events[-1] == b"data: [DONE]\n\n"
        chunks = [json.loads(e.removeprefix(b"data: ")) for e in events[:-1]]
        assert all(c["object"] == "chat.completion.chunk" for c in chunks)
        assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
        assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
        assert all(c["usage"] is None for c in chunks[:-1])  # include_usage: null until the end
        assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]].count(None) == len(chunks) - 2


# -- the request ------------------------------------------------------------------------------


async def test_request_is_built_from_the_neutral_request(start: Start) -> None:
    server, provider = start([{"content": "ok"}], headers={"x-extra": "1"})
    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    request = ModelRequest(
        model=MODEL,
        system="You are roost.",
        messages=(
            {"role": "user", "content": [{"type": "text", "text": "read a.txt"},
                                         {"type": "text", "text": "and b.txt"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},  # dropped
                {"type": "text", "text": ""},
                call("call_1", "read", {"path": "a.txt"}),
                call("call_2", "read", {"path": "b.txt"}),
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "no such file",
                 "is_error": True},
                {"type": "tool_result", "tool_use_id": "call_2",
                 "content": [{"type": "text", "text": "B1"}, {"type": "text", "text": "B2"}]},
                {"type": "text", "text": "now summarize"},
            ]},
            {"role": "assistant", "content": [{"type": "text", "text": "Done."}]},
        ),
        tools=(ToolSpec("read", "Read a file.", schema),),
        max_tokens=1234,
    )

    await provider.stream(request, Deltas())

    recorded = server.requests[0]
    assert recorded.path == "/v1/chat/completions"
    assert recorded.headers["authorization"] == f"Bearer {KEY}"
    assert recorded.headers["x-extra"] == "1"
    body = recorded.body
    assert body["model"] == MODEL
    assert body["max_tokens"] == 1234
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert "reasoning_effort" not in body
    assert body["tools"] == [{"type": "function", "function": {
        "name": "read", "description": "Read a file.", "parameters": schema}}]
    assert body["messages"] == [
        {"role": "system", "content": "You are roost."},
        {"role": "user", "content": "read a.txt\n\nand b.txt"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "read", "arguments": '{"path": "a.txt"}'}},
            {"id": "call_2", "type": "function",
             "function": {"name": "read", "arguments": '{"path": "b.txt"}'}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Error: no such file"},
        {"role": "tool", "tool_call_id": "call_2", "content": "B1\nB2"},
        {"role": "user", "content": "now summarize"},
        {"role": "assistant", "content": "Done."},
    ]


async def test_no_system_no_tools_and_no_key_are_left_out(start: Start) -> None:
    server, provider = start([{"content": "ok"}], api_key=None)
    await provider.stream(ModelRequest(model=MODEL, system="", messages=HI.messages), Deltas())
    recorded = server.requests[0]
    assert "authorization" not in recorded.headers
    assert "tools" not in recorded.body
    assert recorded.body["messages"] == [{"role": "user", "content": "hi"}]


async def test_configured_headers_replace_the_defaults(start: Start) -> None:
    server, provider = start([{"content": "ok"}], headers={"Authorization": "Token abc"})
    await provider.stream(HI, Deltas())
    assert server.requests[0].headers["authorization"] == "Token abc"


@pytest.mark.parametrize(
    ("think", "effort"),
    [(1024, "low"), (4095, "low"), (4096, "medium"), (16383, "medium"), (16384, "high"),
     (64000, "high")],
)
async def test_reasoning_effort_comes_from_think(start: Start, think: int, effort: str) -> None:
    server, provider = start([{"content": "ok"}])
    await provider.stream(ModelRequest(model=MODEL, system="", messages=HI.messages,
                                       think=think), Deltas())
    assert server.requests[0].body["reasoning_effort"] == effort


async def test_unsendable_block_fails_before_anything_is_sent(start: Start) -> None:
    server, provider = start([{"content": "never"}])
    request = ModelRequest(model=MODEL, system="", messages=(
        {"role": "user", "content": [{"type": "image", "source": {"type": "base64"}}]},))
    with pytest.raises(ProviderError, match="^openai: cannot send a image block in a user message$"):
        await provider.stream(request, Deltas())
    assert server.requests == []


# -- the reply ----------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning"])
async def test_reasoning_is_streamed_but_not_kept(start: Start, key: str) -> None:
    server, provider = start([{"reasoning": ["The user ", "says hi."], "reasoning_key": key,
                               "content": ["Hi", "!"]}])
    deltas = Deltas()
    result = await provider.stream(HI, deltas)
    assert deltas == [("reasoning", "The user "), ("reasoning", "says hi."),
                      ("text", "Hi"), ("text", "!")]
    assert result.content == ({"type": "text", "text": "Hi!"},)


async def test_interleaved_tool_calls_are_assembled_by_index(start: Start) -> None:
    a = {"path": "src/é.py", "lines": [1, 20], "opts": {"note": "a \"q\" \\ b"}}
    b = {"command": "ls -la"}
    ta, tb = json.dumps(a), json.dumps(b)
    server, provider = start([{
        "content": "Let me look.",
        "tool_calls": [
            # Uneven pieces, cutting through strings, escapes and numbers.
            {"id": "call_a", "name": "read", "parts": [ta[:3], ta[3:11], ta[11:12], ta[12:30],
                                                       ta[30:]]},
            {"id": "call_b", "name": "bash", "parts": [tb[:1], tb[1:]]},
            {"id": "call_c", "name": "ls", "parts": []},
        ],
        "interleave": True,
    }])
    deltas = Deltas()
    result = await provider.stream(HI, deltas)
    assert result.stop_reason == "tool_use"
    assert result.content == ({"type": "text", "text": "Let me look."}, call("call_a", "read", a),
                              call("call_b", "bash", b), call("call_c", "ls", {}))
    assert all(kind == "text" for kind, _ in deltas)


async def test_tool_call_quirks_of_compatible_servers(start: Start) -> None:
    raw = [
        # Ollama: every parallel call at index 0, whole, told apart by id.
        [{"index": 0, "id": "call_o1", "type": "function",
          "function": {"name": "read", "arguments": '{"path": "a"}'}}],
        [{"index": 0, "id": "call_o2", "type": "function",
          "function": {"name": "read", "arguments": '{"path": "b"}'}}],
        # Gemini: no index at all.
        [{"id": "call_g1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
        # LM Studio: a new id with every piece of one call; explicit nulls; a name in pieces.
        [{"index": 3, "id": "call_l1", "type": "function",
          "function": {"name": "web_", "arguments": '{"q": '}}],
        [{"index": 3, "id": "call_l2", "type": None, "function": {"name": "search",
                                                                 "arguments": '"x"}'}}],
        # No id at all (one is made up); the name repeated; arguments as an object.
        [{"index": 4, "function": {"name": "bash", "arguments": None}}],
        [{"index": 4, "function": {"name": "bash", "arguments": {"command": "true"}}}],
    ]
    server, provider = start([{"raw_tool_calls": raw, "finish_reason": "stop"}])
    result = await provider.stream(HI, Deltas())
    assert result.stop_reason == "tool_use"  # "stop" with tool calls
    *named, made_up = result.content
    assert named == [call("call_o1", "read", {"path": "a"}), call("call_o2", "read", {"path": "b"}),
                     call("call_g1", "ls", {}), call("call_l1", "web_search", {"q": "x"})]
    assert made_up["name"] == "bash" and made_up["input"] == {"command": "true"}
    assert made_up["id"].startswith("call_") and len(made_up["id"]) > 10


async def test_tool_call_with_broken_arguments_is_a_provider_error(start: Start) -> None:
    server, provider = start([
        {"tool_calls": [{"id": "call_1", "name": "read", "parts": ['{"pa', "th"]}]},
        {"tool_calls": [{"id": "call_1", "name": "read", "parts": ["[1, 2]"]}]},
    ])
    with pytest.raises(ProviderError, match=r"^openai: tool call 'read' arguments are not JSON \("):
        await provider.stream(HI, Deltas())
    with pytest.raises(ProviderError, match="^openai: tool call 'read' arguments are not a JSON object$"):
        await provider.stream(HI, Deltas())


async def test_tool_call_cut_at_max_tokens_keeps_an_empty_input(start: Start) -> None:
    server, provider = start([{"content": "Writing", "finish_reason": "length",
                               "tool_calls": [{"id": "call_1", "name": "write",
                                               "parts": ['{"text": "aaaa']}]}])
    result = await provider.stream(HI, Deltas())
    assert result.stop_reason == "max_tokens"
    assert result.content == ({"type": "text", "text": "Writing"}, call("call_1", "write", {}))


@pytest.mark.parametrize(
    ("finish", "stop_reason"),
    [("stop", "end_turn"), ("length", "max_tokens"), ("content_filter", "refusal"),
     ("something_new", "something_new")],
)
async def test_finish_reason_is_mapped(start: Start, finish: str, stop_reason: str) -> None:
    server, provider = start([{"content": "partial", "finish_reason": finish}])
    result = await provider.stream(HI, Deltas())
    assert result.stop_reason == stop_reason
    assert result.content == ({"type": "text", "text": "partial"},)


async def test_usage_without_cache_details_and_without_usage(start: Start) -> None:
    server, provider = start([
        {"content": "a", "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
        {"content": "b", "usage": None},
    ])
    first = await provider.stream(HI, Deltas())
    assert first.usage == {"input_tokens": 3, "output_tokens": 4}
    assert all(type(v) is int for v in first.usage.values())
    assert (await provider.stream(HI, Deltas())).usage == {}


async def test_server_ignoring_stream_answers_one_json_completion(start: Start) -> None:
    server, provider = start([{"json": True, "content": "whole",
                               "tool_calls": [{"id": "call_1", "name": "ls", "arguments": {}}]}])
    deltas = Deltas()
    result = await provider.stream(HI, deltas)
    assert deltas == [("text", "whole")]
    assert result.content == ({"type": "text", "text": "whole"}, call("call_1", "ls", {}))
    assert result.stop_reason == "tool_use"


# -- the connection -----------------------------------------------------------------------------


async def test_100_consecutive_turns_use_one_connection(start: Start) -> None:
    server, provider = start([{"transcript": "openai_text.sse"}] * 50
                             + [{"content": ["a", "b"]}] * 50)
    for _ in range(100):
        await provider.stream(HI, Deltas())
    assert len(server.requests) == 100
    assert server.connections == 1


async def test_error_responses_and_retries_keep_the_connection(start: Start) -> None:
    server, provider = start([{"status": 429, "headers": FAST_RETRY}, {"content": "ok"},
                              {"status": 400}, {"content": "ok"}])
    await provider.stream(HI, Deltas())
    with pytest.raises(ProviderError):
        await provider.stream(HI, Deltas())
    await provider.stream(HI, Deltas())
    assert server.connections == 1


async def test_body_held_open_after_done_is_cut_and_the_reply_kept(
    start: Start, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_openai, "_DRAIN_SECONDS", 0.1)
    sse = b"".join(transcript_events("openai_text.sse")).decode() + ": keep-alive\n\n"
    server, provider = start([{"sse": sse, "stall_after": 13}, {"content": "next"}])
    began = trio.current_time()
    result = await provider.stream(HI, Deltas())
    # The body is held open with no end: returning at all shows the drain was cut.
    assert trio.current_time() - began < 10.0
    assert result.content == ({"type": "text", "text": "Hello! How can I help you today?"},)
    assert (await provider.stream(HI, Deltas())).content == ({"type": "text", "text": "next"},)
    assert server.connections == 2  # the held connection was given up


# -- errors and retries -------------------------------------------------------------------------


@pytest.mark.parametrize("header", [{"retry-after": "0.15"}, {"retry-after-ms": "150"}])
async def test_rate_limit_honours_retry_after(start: Start, header: dict[str, str]) -> None:
    server, provider = start([{"status": 429, "headers": header}, {"content": "made it"}],
                             retry_base=5.0)  # the header wins over the backoff
    began = trio.current_time()
    result = await provider.stream(HI, Deltas())
    waited = trio.current_time() - began
    assert result.content == ({"type": "text", "text": "made it"},)
    # The header's 0.15 s, not the 5 s backoff (the upper bound is loose: load only adds).
    assert 0.15 <= waited < 4.0
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body


async def test_retry_after_is_capped_by_retry_max(start: Start) -> None:
    server, provider = start([{"status": 529, "headers": {"retry-after": "30"}},
                              {"content": "ok"}], retry_max=0.05)
    with trio.fail_after(2):
        await provider.stream(HI, Deltas())
    assert len(server.requests) == 2


async def test_server_error_then_success_is_retried_with_backoff(start: Start) -> None:
    server, provider = start([{"status": 500}, {"status": 503}, {"content": "ok"}])
    result = await provider.stream(HI, Deltas())
    assert result.content == ({"type": "text", "text": "ok"},)
    assert len(server.requests) == 3 and result.retries == 2


async def test_always_rate_limited_fails_after_the_retries(start: Start) -> None:
    server, provider = start([{"status": 429, "headers": FAST_RETRY}] * 3, max_retries=2)
    with pytest.raises(ProviderError) as info:
        await provider.stream(HI, Deltas())
    assert info.value.message == (
        "openai: 429 rate_limit_exceeded: Rate limit reached for gpt-fake in organization "
        "org-fake on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again "
        "in 20s. (after 2 retries)")
    assert not isinstance(info.value, ProviderUnavailable)
    assert len(server.requests) == 3


async def test_max_retries_zero_and_the_name_in_messages(start: Start) -> None:
    server, provider = start([{"status": 500}], max_retries=0, name="local")
    with pytest.raises(ProviderError, match=r"^local: 500 server_error: The server had an error"):
        await provider.stream(HI, Deltas())
    assert len(server.requests) == 1


async def test_invalid_request_is_not_retried(start: Start) -> None:
    message = "Invalid type for 'max_tokens': expected an integer."
    server, provider = start([
        {"status": 400, "error": {"message": message, "code": "invalid_type"}},
        {"content": "never served"},
    ])
    with pytest.raises(ProviderError) as info:
        await provider.stream(HI, Deltas())
    assert info.value.message == f"openai: 400 invalid_type: {message}"
    assert len(server.requests) == 1


@pytest.mark.parametrize(("status", "code"), [(401, "invalid_api_key"),
                                              (403, "unsupported_country_region_territory"),
                                              (404, "model_not_found")])
async def test_bad_key_or_unknown_model_is_unavailable(start: Start, status: int, code: str) -> None:
    server, provider = start([{"status": status}])
    with pytest.raises(ProviderUnavailable, match=rf"^openai: {status} {code}: "):
        await provider.stream(HI, Deltas())
    assert len(server.requests) == 1


async def test_error_page_that_is_not_json(start: Start) -> None:
    server, provider = start([{"status": 502, "body": "<html><h1>502 Bad Gateway</h1></html>"}],
                             max_retries=0)
    with pytest.raises(ProviderError,
                       match=r"^openai: 502 Bad Gateway: <html><h1>502 Bad Gateway</h1></html>$"):
        await provider.stream(HI, Deltas())


async def test_stream_cut_midway_is_a_provider_error(start: Start) -> None:
    server, provider = start([{"content": ["one ", "two ", "three"], "cut_after": 3},
                              {"content": "again"}])
    deltas = Deltas()
    with pytest.raises(ProviderError, match="^openai: stream cut off"):
        await provider.stream(HI, deltas)
    assert deltas == [("text", "one "), ("text", "two ")]  # role chunk, then 2 pieces
    assert len(server.requests) == 1  # never retried once the stream has begun
    assert (await provider.stream(HI, Deltas())).content == ({"type": "text", "text": "again"},)


async def test_stream_ending_before_done_is_a_provider_error(start: Start) -> None:
    server, provider = start([{"content": ["a", "b"], "end_after": 3}])
    deltas = Deltas()
    with pytest.raises(ProviderError, match=r"^openai: stream ended before \[DONE\]$"):
        await provider.stream(HI, deltas)
    assert deltas == [("text", "a"), ("text", "b")]


async def test_malformed_sse_is_a_provider_error_and_the_body_is_drained(start: Start) -> None:
    server, provider = start([{"content": ["a", "b", "c"], "malformed_after": 2},
                              {"content": "next"}])
    deltas = Deltas()
    with pytest.raises(ProviderError, match=r"^openai: malformed event in the stream \(not JSON: "):
        await provider.stream(HI, deltas)
    assert deltas == [("text", "a")]
    assert (await provider.stream(HI, Deltas())).content == ({"type": "text", "text": "next"},)
    assert server.connections == 1  # the rest of the body was read: the connection was reused


async def test_error_inside_the_stream_is_a_provider_error(start: Start) -> None:
    server, provider = start([
        {"content": ["a", "b"], "error_after": 2, "error": {"message": "Overloaded"}},
        {"content": "next"},
    ])
    deltas = Deltas()
    with pytest.raises(ProviderError, match="^openai: server_error during the stream: Overloaded$"):
        await provider.stream(HI, deltas)
    assert deltas == [("text", "a")]
    assert len(server.requests) == 1  # not retried
    assert (await provider.stream(HI, Deltas())).content == ({"type": "text", "text": "next"},)


async def test_slow_first_byte_past_the_timeout(start: Start) -> None:
    server, provider = start([{"first_byte_after": 5, "content": "late"}], timeout=0.2)
    began = trio.current_time()
    with pytest.raises(ProviderError, match=r"^openai: no response within 0.2 s \(ReadTimeout\)$"):
        await provider.stream(HI, Deltas())
    assert trio.current_time() - began < 4.0  # the server would answer after 5 s
    assert len(server.requests) == 1  # a silent server is not asked again


async def test_stalled_stream_times_out(start: Start) -> None:
    server, provider = start([{"content": "slow", "stall_after": 2}], timeout=0.2)
    with pytest.raises(ProviderError, match=r"^openai: stream timed out waiting for data"):
        await provider.stream(HI, Deltas())


async def test_unreachable_server_is_retried_then_a_provider_error() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    provider = OpenAIProvider(f"http://127.0.0.1:{port}/v1", max_retries=1, retry_base=0.01)
    try:
        with pytest.raises(ProviderError, match=(
            rf"^openai: cannot reach http://127.0.0.1:{port}/v1 \(ConnectError: .*\) "
            r"\(after 1 retry\)$"
        )):
            await provider.stream(HI, Deltas())
    finally:
        await provider.aclose()


async def test_cancellation_mid_stream_propagates_promptly(start: Start) -> None:
    server, provider = start([{"content": ["first", "never"], "stall_after": 2},
                              {"content": "after"}])
    deltas = Deltas()
    began = trio.current_time()

    with trio.move_on_after(0.2) as scope:
        await provider.stream(HI, deltas)

    assert scope.cancelled_caught
    # The stall has no end: returning at all shows the cancellation closed the stream.
    assert trio.current_time() - began < 10.0
    assert deltas == [("text", "first")]
    assert (await provider.stream(HI, Deltas())).content == ({"type": "text", "text": "after"},)


async def test_cancellation_during_retry_backoff_propagates(start: Start) -> None:
    server, provider = start([{"status": 429, "headers": {"retry-after": "30"}}], retry_max=60)
    with trio.move_on_after(0.2) as scope:
        await provider.stream(HI, Deltas())
    assert scope.cancelled_caught
    assert len(server.requests) == 1


async def test_on_delta_raising_cuts_the_stream_and_propagates(start: Start) -> None:
    server, provider = start([{"content": ["a", "b"], "stall_after": 3}, {"content": "ok"}])

    def explode(kind: str, text: str) -> None:
        raise KeyError(text)

    with trio.fail_after(1), pytest.raises(KeyError):
        await provider.stream(HI, explode)
    assert (await provider.stream(HI, Deltas())).content == ({"type": "text", "text": "ok"},)


async def test_closed_provider_refuses_calls(start: Start) -> None:
    server, provider = start([])
    await provider.aclose()
    await provider.aclose()  # idempotent
    with pytest.raises(ProviderError, match="^openai: the provider is closed$"):
        await provider.stream(HI, Deltas())
    assert server.requests == []


async def test_base_url_without_a_scheme_is_unavailable_at_construction() -> None:
    with pytest.raises(ProviderUnavailable,
                       match=r"^ollama: base_url 'localhost:11434/v1' must start with http"):
        OpenAIProvider("localhost:11434/v1", name="ollama")


# -- the decoder and the fold, without IO -------------------------------------------------------


def test_sse_decoder_handles_any_split_crlf_comments_and_multiline_data() -> None:
    wire = (": keep-alive\r\ndata: {\"a\":1}\r\n\r\n"
            "event: error\ndata: {\"b\":\ndata:  \"é\"}\nid: 7\n\n"
            "data: [DONE]\n\n").encode()
    expected = [("message", '{"a":1}'), ("error", '{"b":\n "é"}'), ("message", "[DONE]")]
    for size in (1, 2, 7, len(wire)):
        decoder = SSEDecoder()
        events = []
        for i in range(0, len(wire), size):
            events += decoder.feed(wire[i:i + size])
        assert events == expected, size


def test_fold_reads_deepseek_cache_hits_and_refusals() -> None:
    fold = _Fold("deepseek")
    deltas = fold.feed("message", json.dumps({"choices": [
        {"index": 0, "delta": {"refusal": "I can't help with that."}, "finish_reason": None}]}))
    assert deltas == [("text", "I can't help with that.")]
    fold.feed("message", json.dumps({"choices": [{"index": 0, "delta": {},
                                                  "finish_reason": "content_filter"}],
                                     "usage": {"prompt_tokens": 100, "completion_tokens": 7,
                                               "prompt_cache_hit_tokens": 64}}))
    fold.feed("message", "[DONE]")
    assert fold.reply() == ModelReply(
        content=({"type": "text", "text": "I can't help with that."},), stop_reason="refusal",
        usage={"input_tokens": 36, "output_tokens": 7, "cache_read_input_tokens": 64})


def test_fold_reports_an_error_event() -> None:
    with pytest.raises(ProviderError, match="^x: rate_limit_exceeded during the stream: slow down$"):
        _Fold("x").feed("message", '{"error": {"message": "slow down", "type": "requests", '
                                   '"code": "rate_limit_exceeded"}}')


def test_fold_reports_an_error_event_that_is_not_json() -> None:
    with pytest.raises(ProviderError, match="^x: error during the stream: upstream went away$"):
        _Fold("x").feed("error", "upstream went away")



def test_fold_reports_an_error_in_a_whole_completion() -> None:
    with pytest.raises(ProviderError, match="^x: server_error: boom$"):
        _Fold("x").feed_completion('{"error": {"message": "boom", "type": "server_error"}}')

# -- the fake server on its own -----------------------------------------------------------------


def test_fake_server_runs_as_a_separate_process(tmp_path: Any) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"status": 429}], "default": {"content": "bench"}}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.openai_server", "--port", "0", "--script", str(script)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        answers = [_post(base_url, {"model": MODEL, "messages": []}) for _ in range(3)]
        assert [status for status, _ in answers] == [429, 200, 200]
        assert answers[1][1]["choices"][0]["message"]["content"] == "bench"
    finally:
        proc.terminate()
        proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == 0


def _post(base_url: str, body: dict[str, Any]) -> tuple[int, Any]:
    import http.client

    host, port = base_url.removeprefix("http://").removesuffix("/v1").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(body),
                     {"content-type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


async def test_a_server_that_wants_max_completion_tokens_gets_it_and_keeps_it(start: Start) -> None:
    # OpenAI's own words for its reasoning models.
    message = "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead."
    server, provider = start([
        {"status": 400, "error": {"message": message, "type": "invalid_request_error", "param": "max_tokens"}},
        {"content": "first"},
        {"content": "second"},
    ])
    for expected in ("first", "second"):
        reply = await provider.stream(HI, Deltas())
        assert reply.content == ({"type": "text", "text": expected},)
    bodies = [r.body for r in server.requests]
    assert "max_tokens" in bodies[0] and "max_completion_tokens" not in bodies[0]
    assert all("max_completion_tokens" in b and "max_tokens" not in b for b in bodies[1:])
    assert len(bodies) == 3  # asked once more, then remembered

