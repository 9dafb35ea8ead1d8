"""AnthropicProvider against the fake Messages API server (real SDK, real sockets)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from contextlib import ExitStack
from typing import Any, AsyncIterator, Callable

import pytest
import trio

from roost.daemon.providers._anthropic import AnthropicProvider, _SSEDecoder
from roost.daemon.providers._base import (
    ModelReply,
    ModelRequest,
    ProviderError,
    ProviderUnavailable,
    ToolSpec,
)
from tests.fakes.anthropic_server import FakeAnthropicServer, serve_anthropic

KEY = "sk-ant-test-123"
MODEL = "claude-test"  # not in the SDK's deprecated list, which would warn (= error here)
HI = ModelRequest(model=MODEL, system="be brief", messages=({"role": "user", "content": "hi"},))
FAST_RETRY = {"retry-after": "0.01"}  # the SDK honours fractional seconds; 0 means its own backoff

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
    assert result == ModelReply(
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
    assert body["system"] == "You are roost."
    assert body["tools"] == [{"name": "read", "description": "Read a file.",
                              "input_schema": {"type": "object",
                                               "properties": {"path": {"type": "string"}}}}]
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
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "B"},
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


# -- errors and retries -------------------------------------------------------------------------


async def test_overloaded_then_success_is_retried(start: Start) -> None:
    server, provider = start([
        {"status": 529, "headers": FAST_RETRY},
        reply({"type": "text", "text": "made it"}),
    ])
    result = await provider.stream(HI, Deltas())
    assert result.content == ({"type": "text", "text": "made it"},)
    assert len(server.requests) == 2
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1"]
    assert server.requests[0].body == server.requests[1].body


async def test_rate_limit_then_success_is_retried(start: Start) -> None:
    server, provider = start([
        {"status": 429, "headers": FAST_RETRY},
        {"status": 500, "headers": FAST_RETRY},
        reply({"type": "text", "text": "ok"}),
    ])
    await provider.stream(HI, Deltas())
    assert len(server.requests) == 3


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

    with trio.move_on_after(0.2) as scope:
        await provider.stream(HI, deltas)

    assert scope.cancelled_caught
    assert trio.current_time() - began < 1.0
    assert deltas == [("text", "first")]
    # The client is still usable after the cancelled stream.
    assert (await provider.stream(HI, Deltas())).content == ({"type": "text", "text": "after"},)


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
    with pytest.raises(ProviderUnavailable, match="^ANTHROPIC_API_KEY is not set"):
        AnthropicProvider(api_key="")


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
        decoder = _SSEDecoder()
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
