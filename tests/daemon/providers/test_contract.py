"""What every streaming provider does, run against each vendor's fake server (real sockets,
the vendor's own SSE, the real SDK or httpx2 underneath).

Where the vendors word an error differently, the test says each wording. Their own
behaviour (the SDK's retries, OpenAI's drain and length-limit field, ...) is tested in
test_anthropic.py and test_openai.py; their wire formats without IO in test_*_wire.py.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from dataclasses import replace
from typing import Any

import pytest
import trio

from roost.daemon.providers._base import (
    ModelReply,
    ModelRequest,
    ProviderError,
    ProviderUnavailable,
    ToolSpec,
)
from tests.daemon.providers._vendors import (
    FAST_RETRY,
    HI,
    KEY,
    MODEL,
    Deltas,
    Vendor,
    read_transcript,
)
from tests.daemon.providers.conftest import Start

# -- the reply ----------------------------------------------------------------------------------


async def test_text_deltas_reach_on_delta_in_order(start: Start, vendor: Vendor) -> None:
    pieces = ["Hel", "lo, ", "wor", "ld", "!"]
    server, provider = start([vendor.text(pieces)])
    deltas = Deltas()

    result = await provider.stream(HI, deltas)

    assert deltas == [("text", p) for p in pieces]
    assert result.first_token is not None and result.first_token > 0 and result.retries == 0
    assert replace(result, first_token=None) == ModelReply(
        content=({"type": "text", "text": "Hello, world!"},),
        stop_reason="end_turn",
        usage={"input_tokens": 10, "output_tokens": 5},
    )


async def test_a_transcript_streamed_gives_what_its_fold_gives_alone(
    start: Start, vendor: Vendor,
) -> None:
    server, provider = start([{"transcript": name} for name in vendor.transcripts])
    for name in vendor.transcripts:
        deltas = Deltas()
        result = await provider.stream(HI, deltas)
        alone_deltas, alone = read_transcript(vendor.fold(), name)
        assert deltas == alone_deltas, name
        assert result.first_token is not None and result.first_token > 0
        assert replace(result, first_token=None) == alone, name


async def test_tool_input_is_assembled_from_json_pieces(start: Start, vendor: Vendor) -> None:
    args = {"path": "src/é.py", "lines": [1, 20], "opts": {"follow": True, "note": "a \"q\" \\ b"}}
    text = json.dumps(args)
    # Uneven pieces, cutting through strings, escapes and numbers.
    parts = ["", text[:3], text[3:11], text[11:12], text[12:30], text[30:]]
    server, provider = start([vendor.tools("Let me look.", [
        ("call_9", "read", parts), ("call_10", "list", [""]), ("call_11", "ls", []),
    ])])
    deltas = Deltas()

    result = await provider.stream(HI, deltas)

    assert result.stop_reason == "tool_use"
    assert result.content == (
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "call_9", "name": "read", "input": args},
        {"type": "tool_use", "id": "call_10", "name": "list", "input": {}},
        {"type": "tool_use", "id": "call_11", "name": "ls", "input": {}},
    )
    assert all(kind == "text" for kind, _ in deltas)  # tool JSON is not reported as deltas
    assert "".join(text for _, text in deltas) == "Let me look."


BROKEN_TOOL_INPUT = {
    "anthropic": (r"^anthropic: tool_use 'read' input is not JSON \(",
                  r"^anthropic: tool_use 'read' input is not an object$"),
    "openai": (r"^openai: tool call 'read' arguments are not JSON \(",
               r"^openai: tool call 'read' arguments are not a JSON object$"),
}


async def test_tool_input_that_is_not_a_json_object_is_a_provider_error(
    start: Start, vendor: Vendor,
) -> None:
    not_json, not_object = BROKEN_TOOL_INPUT[vendor.name]
    server, provider = start([vendor.tools("", [("call_1", "read", ['{"pa', "th"])]),
                              vendor.tools("", [("call_1", "read", ["[1, 2]"])])])
    with pytest.raises(ProviderError, match=not_json):
        await provider.stream(HI, Deltas())
    with pytest.raises(ProviderError, match=not_object):
        await provider.stream(HI, Deltas())


# -- the request --------------------------------------------------------------------------------


async def test_the_server_receives_the_wire_modules_body_the_key_and_the_headers(
    start: Start, vendor: Vendor,
) -> None:
    server, provider = start([vendor.text(["ok"])], headers={"x-team": "tools"})
    request = ModelRequest(
        model=MODEL,
        system="You are roost.",
        messages=(
            {"role": "user", "content": "read a.txt"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "sig"},
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "call_1", "name": "read", "input": {"path": "a.txt"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "é ✓",
                 "is_error": True},
            ]},
        ),
        tools=(ToolSpec("read", "Read a file.", {"type": "object",
                                                 "properties": {"path": {"type": "string"}}}),),
        max_tokens=1234,
        think=2048,
    )

    await provider.stream(request, Deltas())

    recorded = server.requests[0]
    assert recorded.path == vendor.path
    assert recorded.body == vendor.body(request)
    assert recorded.body["model"] == MODEL and recorded.body["stream"] is True
    assert recorded.headers["content-type"] == "application/json"
    assert vendor.key_sent(recorded.headers, KEY)
    assert recorded.headers["x-team"] == "tools"


# -- errors and retries -------------------------------------------------------------------------


async def test_an_overloaded_server_then_success_is_retried(start: Start, vendor: Vendor) -> None:
    server, provider = start([{"status": 529, "headers": FAST_RETRY}, vendor.text(["made it"])])
    result = await provider.stream(HI, Deltas())
    assert result.content == ({"type": "text", "text": "made it"},)
    assert len(server.requests) == 2 and result.retries == 1
    assert server.requests[0].body == server.requests[1].body


async def test_a_rate_limit_and_a_server_error_then_success_are_retried(
    start: Start, vendor: Vendor,
) -> None:
    server, provider = start([{"status": 429, "headers": FAST_RETRY},
                              {"status": 500, "headers": FAST_RETRY}, vendor.text(["ok"])])
    result = await provider.stream(HI, Deltas())
    assert result.content == ({"type": "text", "text": "ok"},)
    assert len(server.requests) == 3 and result.retries == 2


ALWAYS_FAILING = {
    "anthropic": (529, "anthropic: 529 overloaded_error: Overloaded (after 2 retries)"),
    "openai": (429, "openai: 429 rate_limit_exceeded: Rate limit reached for gpt-fake in "
                    "organization org-fake on requests per min (RPM): Limit 3, Used 3, "
                    "Requested 1. Please try again in 20s. (after 2 retries)"),
}


async def test_always_failing_fails_after_the_retries(start: Start, vendor: Vendor) -> None:
    status, message = ALWAYS_FAILING[vendor.name]
    server, provider = start([{"status": status, "headers": FAST_RETRY}] * 3, max_retries=2)
    with pytest.raises(ProviderError) as info:
        await provider.stream(HI, Deltas())
    assert info.value.message == message
    assert not isinstance(info.value, ProviderUnavailable)
    assert len(server.requests) == 3


OVERLOADED = {"anthropic": r"^anthropic: 529 overloaded_error: Overloaded$",
              "openai": r"^openai: 529 overloaded: Overloaded$"}


async def test_max_retries_zero_fails_at_once(start: Start, vendor: Vendor) -> None:
    server, provider = start([{"status": 529}], max_retries=0)
    with pytest.raises(ProviderError, match=OVERLOADED[vendor.name]):
        await provider.stream(HI, Deltas())
    assert len(server.requests) == 1


INVALID = {
    "anthropic": ("invalid_request_error",
                  "max_tokens: 999999 > 64000, which is the maximum allowed"),
    "openai": ("invalid_type", "Invalid type for 'max_tokens': expected an integer."),
}


async def test_invalid_request_is_not_retried(start: Start, vendor: Vendor) -> None:
    code, message = INVALID[vendor.name]
    server, provider = start([vendor.error(400, code, message), vendor.text(["never served"])])
    with pytest.raises(ProviderError) as info:
        await provider.stream(HI, Deltas())
    assert info.value.message == f"{vendor.name}: 400 {code}: {message}"
    assert not isinstance(info.value, ProviderUnavailable)
    assert len(server.requests) == 1


#: The code each fake's 401, 403 and 404 bodies carry.
UNAVAILABLE = {
    "anthropic": {401: "authentication_error", 403: "permission_error", 404: "not_found_error"},
    "openai": {401: "invalid_api_key", 403: "unsupported_country_region_territory",
               404: "model_not_found"},
}


@pytest.mark.parametrize("status", [401, 403, 404])
async def test_bad_key_or_unknown_model_is_unavailable(
    start: Start, vendor: Vendor, status: int,
) -> None:
    server, provider = start([{"status": status}])
    code = UNAVAILABLE[vendor.name][status]
    with pytest.raises(ProviderUnavailable, match=rf"^{vendor.name}: {status} {code}: "):
        await provider.stream(HI, Deltas())
    assert len(server.requests) == 1


@pytest.mark.parametrize("header", [{"retry-after": "0.75"}, {"retry-after-ms": "750"}])
async def test_rate_limit_honours_retry_after(
    start: Start, vendor: Vendor, header: dict[str, str],
) -> None:
    server, provider = start([{"status": 429, "headers": header}, vendor.text(["made it"])])
    began = trio.current_time()
    result = await provider.stream(HI, Deltas())
    waited = trio.current_time() - began
    assert result.content == ({"type": "text", "text": "made it"},)
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body
    # The server's 0.75 s, not the provider's own backoff for a first retry (the SDK's is
    # 0.375-0.5 s, the test provider's 0.01 s). A lower bound only: load makes waits longer.
    assert waited >= 0.75


NO_RESPONSE = {"anthropic": r"^anthropic: request timed out$",
               "openai": r"^openai: no response within 0.2 s \(ReadTimeout\)$"}


@pytest.mark.parametrize("silence", ["no-headers", "no-body"])
async def test_slow_first_byte_past_the_timeout(start: Start, vendor: Vendor, silence: str) -> None:
    if silence == "no-headers":  # not even the status line before the timeout
        turn = {"first_byte_after": 30, **vendor.text(["late"])}
        message = NO_RESPONSE[vendor.name]
    else:  # headers, then nothing: the first SSE byte is late
        turn = vendor.text(["late"], stall_after=0)
        message = rf"^{vendor.name}: stream timed out waiting for data \(ReadTimeout\)$"
    server, provider = start([turn], timeout=0.2, max_retries=0)
    began = trio.current_time()
    with pytest.raises(ProviderError, match=message):
        await provider.stream(HI, Deltas())
    # Well under the server's delay (30 s, or a stall with no end): the timeout fired.
    assert 0.2 <= trio.current_time() - began < 10.0
    assert len(server.requests) == 1


async def test_stalled_stream_times_out(start: Start, vendor: Vendor) -> None:
    server, provider = start([vendor.text(["slow", "er"], stall_after=vendor.lead + 1)],
                             timeout=0.2, max_retries=0)
    deltas = Deltas()
    with pytest.raises(ProviderError, match=rf"^{vendor.name}: stream timed out waiting for data"):
        await provider.stream(HI, deltas)
    assert deltas == [("text", "slow")]


async def test_unreachable_server_is_retried_then_a_provider_error(vendor: Vendor) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}{vendor.url_path}"
    provider = vendor.provider(url, max_retries=1)
    try:
        with pytest.raises(ProviderError, match=(
            rf"^{vendor.name}: cannot reach {re.escape(url)}/? \(ConnectError: .*\) "
            r"\(after 1 retry\)$"
        )):
            await provider.stream(HI, Deltas())
    finally:
        await provider.aclose()


# -- failures inside the stream -----------------------------------------------------------------


async def test_stream_cut_midway_is_a_provider_error(start: Start, vendor: Vendor) -> None:
    server, provider = start([vendor.text(["one ", "two ", "three"], cut_after=vendor.lead + 2),
                              vendor.text(["again"])])
    deltas = Deltas()
    with pytest.raises(ProviderError, match=rf"^{vendor.name}: stream cut off"):
        await provider.stream(HI, deltas)
    assert deltas == [("text", "one "), ("text", "two ")]
    assert len(server.requests) == 1  # never retried once the stream has begun
    # The client is still usable.
    assert (await provider.stream(HI, Deltas())).content == ({"type": "text", "text": "again"},)


ENDED_EARLY = {"anthropic": r"^anthropic: stream ended before message_stop$",
               "openai": r"^openai: stream ended before \[DONE\]$"}


async def test_stream_ending_before_its_end_is_a_provider_error(start: Start, vendor: Vendor) -> None:
    # The body ends cleanly (terminating chunk) after the deltas, with nothing more.
    server, provider = start([vendor.text(["a", "b"], end_after=vendor.lead + 2)])
    deltas = Deltas()
    with pytest.raises(ProviderError, match=ENDED_EARLY[vendor.name]):
        await provider.stream(HI, deltas)
    assert deltas == [("text", "a"), ("text", "b")]


MALFORMED = {"anthropic": r"^anthropic: malformed content_block_delta event \(JSONDecodeError: ",
             "openai": r"^openai: malformed event in the stream \(not JSON: "}


async def test_malformed_event_is_a_provider_error_and_the_body_is_drained(
    start: Start, vendor: Vendor,
) -> None:
    server, provider = start([vendor.text(["a", "b", "c"], malformed_after=vendor.lead + 1),
                              vendor.text(["next"])])
    deltas = Deltas()
    with pytest.raises(ProviderError, match=MALFORMED[vendor.name]):
        await provider.stream(HI, deltas)
    assert deltas == [("text", "a")]
    assert len(server.requests) == 1  # not retried
    assert (await provider.stream(HI, Deltas())).content == ({"type": "text", "text": "next"},)
    assert server.connections == 1  # the rest of the body was read: the connection was reused


ERROR_KIND = {"anthropic": "overloaded_error", "openai": "server_error"}


async def test_error_event_inside_the_stream_is_a_provider_error(start: Start, vendor: Vendor) -> None:
    server, provider = start([
        vendor.text(["a", "b"], error_after=vendor.lead + 1, error={"message": "Overloaded"}),
        vendor.text(["next"]),
    ])
    deltas = Deltas()
    with pytest.raises(ProviderError, match=(
        rf"^{vendor.name}: {ERROR_KIND[vendor.name]} during the stream: Overloaded$"
    )):
        await provider.stream(HI, deltas)
    assert deltas == [("text", "a")]
    assert len(server.requests) == 1  # not retried
    assert (await provider.stream(HI, Deltas())).content == ({"type": "text", "text": "next"},)


# -- cancellation and the caller's errors -------------------------------------------------------


@pytest.mark.parametrize("when", ["at-the-first-delta", "while-stalled"])
async def test_cancellation_mid_stream_propagates_promptly(
    start: Start, vendor: Vendor, when: str,
) -> None:
    server, provider = start([vendor.text(["first", "never"], stall_after=vendor.lead + 1),
                              vendor.text(["after"])])
    deltas = Deltas()
    began = trio.current_time()

    # Cancelled once the first delta is in (however long a loaded machine took to get
    # there): at once, or by a deadline that passes while the stream stalls.
    with trio.CancelScope() as scope:

        def on_delta(kind: str, text: str) -> None:
            deltas(kind, text)
            if when == "at-the-first-delta":
                scope.cancel()
            else:
                scope.deadline = trio.current_time() + 0.2

        await provider.stream(HI, on_delta)

    assert scope.cancelled_caught
    # The stall has no end: returning at all shows the cancellation closed the stream.
    assert trio.current_time() - began < 10.0
    assert deltas == [("text", "first")]
    # The client is still usable after the cancelled stream.
    assert (await provider.stream(HI, Deltas())).content == ({"type": "text", "text": "after"},)


@pytest.mark.parametrize("status", [429, 529])
async def test_cancellation_during_retry_backoff_propagates(
    start: Start, vendor: Vendor, status: int,
) -> None:
    server, provider = start([{"status": status, "headers": {"retry-after": "30"}}])
    with trio.move_on_after(0.2) as scope:
        await provider.stream(HI, Deltas())
    assert scope.cancelled_caught
    assert len(server.requests) == 1


async def test_on_delta_raising_cuts_the_stream_and_propagates(start: Start, vendor: Vendor) -> None:
    server, provider = start([vendor.text(["a", "b"], stall_after=vendor.lead + 1),
                              vendor.text(["ok"])])

    def explode(kind: str, text: str) -> None:
        raise KeyError(text)

    with trio.fail_after(1), pytest.raises(KeyError):
        await provider.stream(HI, explode)
    assert (await provider.stream(HI, Deltas())).content == ({"type": "text", "text": "ok"},)


async def test_closed_provider_refuses_calls(start: Start, vendor: Vendor) -> None:
    server, provider = start([])
    await provider.aclose()
    await provider.aclose()  # idempotent
    with pytest.raises(ProviderError, match=rf"^{vendor.name}: the provider is closed$"):
        await provider.stream(HI, Deltas())
    assert server.requests == []


# -- the connection -----------------------------------------------------------------------------


async def test_100_consecutive_turns_use_one_connection(start: Start, vendor: Vendor) -> None:
    server, provider = start([{"transcript": vendor.transcripts[0]}] * 50
                             + [vendor.text(["a", "b"])] * 50)
    for _ in range(100):
        await provider.stream(HI, Deltas())
    assert len(server.requests) == 100
    assert server.connections == 1



# -- the fake server on its own -----------------------------------------------------------------


def test_fake_server_runs_as_a_separate_process(tmp_path: Any, vendor: Vendor) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"status": 529}],
                                  "default": vendor.text(["bench"])}))
    proc = subprocess.Popen(
        [sys.executable, "-m", vendor.fake_module, "--port", "0", "--script", str(script)],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert re.fullmatch(rf"http://127\.0\.0\.1:\d+{vendor.url_path}", base_url)
        answers = [_post(base_url.removesuffix(vendor.url_path), vendor.path,
                         {"model": MODEL, "max_tokens": 5, "messages": []}) for _ in range(3)]
        assert [status for status, _ in answers] == [529, 200, 200]
        assert vendor.reply_text(answers[1][1]) == "bench"
    finally:
        proc.terminate()
        proc.wait(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()
    assert proc.returncode == 0


def _post(base_url: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
    import http.client

    host, port = base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    try:
        conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()
