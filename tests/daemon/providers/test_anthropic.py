"""AnthropicProvider's own behaviour against the fake Messages API server (real SDK, real
sockets): the SDK's retries and headers, the key from the environment, and what a
cancelled stream has reported. What it shares with the OpenAI provider is in
test_contract.py; its wire format, without IO, in test_anthropic_wire.py."""

from __future__ import annotations

import pytest
import trio

from roost.daemon.providers._anthropic import AnthropicProvider
from roost.daemon.providers._base import ProviderError, ProviderUnavailable
from tests.daemon.providers._vendors import ANTHROPIC, FAST_RETRY, HI, KEY, Deltas, Vendor
from tests.daemon.providers.conftest import Start
from tests.fakes.anthropic_server import serve_anthropic


@pytest.fixture
def vendor() -> Vendor:
    return ANTHROPIC


def reply(*content: dict, stop_reason: str = "end_turn", **extra: object) -> dict:
    return {"content": list(content), "stop_reason": stop_reason, **extra}


# -- the SDK's retries --------------------------------------------------------------------------


@pytest.mark.parametrize("status", [529, 500])
async def test_the_sdk_numbers_its_attempts(start: Start, status: int) -> None:
    server, provider = start([
        {"status": status, "headers": FAST_RETRY},
        reply({"type": "text", "text": "second time lucky"}),
    ])
    result = await provider.stream(HI, Deltas())
    assert result.content == ({"type": "text", "text": "second time lucky"},)
    assert result.retries == 1
    assert [r.headers["x-stainless-retry-count"] for r in server.requests] == ["0", "1"]


async def test_slow_first_byte_is_retried_then_fails_clearly(start: Start) -> None:
    slow = {"first_byte_after": 30, **reply({"type": "text", "text": "late"})}
    server, provider = start([slow, slow], timeout=0.2, max_retries=1)
    with pytest.raises(ProviderError, match=r"^anthropic: request timed out \(after 1 retry\)$"):
        await provider.stream(HI, Deltas())
    assert len(server.requests) == 2


# -- what a cancelled stream has reported ------------------------------------------------------


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


# -- keys, headers and construction -------------------------------------------------------------


async def test_missing_key_is_unavailable_at_construction() -> None:
    with pytest.raises(ProviderUnavailable, match="^ANTHROPIC_API_KEY is not set"):
        AnthropicProvider()
    # "" is a server that needs no key (api_key_env = ""): it builds.
    await AnthropicProvider(api_key="", base_url="http://127.0.0.1:9").aclose()


async def test_the_api_version_is_sent(start: Start) -> None:
    server, provider = start([reply({"type": "text", "text": "ok"})])
    await provider.stream(HI, Deltas())
    assert ANTHROPIC.key_sent(server.requests[0].headers, KEY)
    assert "anthropic-version" in server.requests[0].headers


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
    assert ANTHROPIC.key_sent(server.requests[0].headers, "sk-from-env")
