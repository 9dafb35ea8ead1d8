"""OpenAIProvider's own behaviour against the fake Chat Completions server (real httpx2, real
sockets): its retries and backoff, its headers, the drain that keeps a connection, the name
of the length limit a server takes. What it shares with the Anthropic provider is in
test_contract.py; its wire format, without IO, in test_openai_wire.py."""

from __future__ import annotations

import pytest
import trio

from roost.daemon.providers import _openai
from roost.daemon.providers._base import ModelRequest, ProviderError, ProviderUnavailable
from roost.daemon.providers._openai import OpenAIProvider
from tests.daemon.providers._vendors import FAST_RETRY, HI, MODEL, OPENAI, Deltas, Vendor
from tests.daemon.providers.conftest import Start
from tests.fakes.openai_server import transcript_events


@pytest.fixture
def vendor() -> Vendor:
    return OPENAI


# -- the request --------------------------------------------------------------------------------


async def test_no_key_sends_no_authorization(start: Start) -> None:
    server, provider = start([{"content": "ok"}], api_key=None)
    await provider.stream(HI, Deltas())
    assert "authorization" not in server.requests[0].headers


async def test_configured_headers_replace_the_defaults(start: Start) -> None:
    server, provider = start([{"content": "ok"}], headers={"Authorization": "Token abc"})
    await provider.stream(HI, Deltas())
    assert server.requests[0].headers["authorization"] == "Token abc"


async def test_unsendable_block_fails_before_anything_is_sent(start: Start) -> None:
    server, provider = start([{"content": "never"}])
    request = ModelRequest(model=MODEL, system="", messages=(
        {"role": "user", "content": [{"type": "image", "source": {"type": "base64"}}]},))
    with pytest.raises(ProviderError, match="^openai: cannot send a image block in a user message$"):
        await provider.stream(request, Deltas())
    assert server.requests == []


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


# -- the reply ----------------------------------------------------------------------------------


async def test_server_ignoring_stream_answers_one_json_completion(start: Start) -> None:
    server, provider = start([{"json": True, "content": "whole",
                               "tool_calls": [{"id": "call_1", "name": "ls", "arguments": {}}]}])
    deltas = Deltas()
    result = await provider.stream(HI, deltas)
    assert deltas == [("text", "whole")]
    assert result.content == ({"type": "text", "text": "whole"},
                              {"type": "tool_use", "id": "call_1", "name": "ls", "input": {}})
    assert result.stop_reason == "tool_use"
    assert result.first_token is not None and result.first_token > 0


# -- the connection -----------------------------------------------------------------------------


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


# -- retries ------------------------------------------------------------------------------------


@pytest.mark.parametrize("header", [{"retry-after": "0.15"}, {"retry-after-ms": "150"}])
async def test_the_retry_after_header_wins_over_a_longer_backoff(
    start: Start, header: dict[str, str],
) -> None:
    server, provider = start([{"status": 429, "headers": header}, {"content": "made it"}],
                             retry_base=5.0)
    began = trio.current_time()
    result = await provider.stream(HI, Deltas())
    assert result.content == ({"type": "text", "text": "made it"},)
    # The header's 0.15 s, not the 3.75-5 s backoff (the bound is loose: load only adds).
    assert 0.15 <= trio.current_time() - began < 3.5
    assert len(server.requests) == 2


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


async def test_max_retries_zero_and_the_name_in_messages(start: Start) -> None:
    server, provider = start([{"status": 500}], max_retries=0, name="local")
    with pytest.raises(ProviderError, match=r"^local: 500 server_error: The server had an error"):
        await provider.stream(HI, Deltas())
    assert len(server.requests) == 1


async def test_a_silent_server_is_not_asked_again(start: Start) -> None:
    server, provider = start([{"first_byte_after": 5, "content": "late"}], timeout=0.2)
    began = trio.current_time()
    with pytest.raises(ProviderError, match=r"^openai: no response within 0.2 s \(ReadTimeout\)$"):
        await provider.stream(HI, Deltas())
    assert trio.current_time() - began < 4.0  # the server would answer after 5 s
    assert len(server.requests) == 1  # with retries left


async def test_error_page_that_is_not_json(start: Start) -> None:
    server, provider = start([{"status": 502, "body": "<html><h1>502 Bad Gateway</h1></html>"}],
                             max_retries=0)
    with pytest.raises(ProviderError,
                       match=r"^openai: 502 Bad Gateway: <html><h1>502 Bad Gateway</h1></html>$"):
        await provider.stream(HI, Deltas())


# -- construction -------------------------------------------------------------------------------


async def test_base_url_without_a_scheme_is_unavailable_at_construction() -> None:
    with pytest.raises(ProviderUnavailable,
                       match=r"^ollama: base_url 'localhost:11434/v1' must start with http"):
        OpenAIProvider("localhost:11434/v1", name="ollama")
