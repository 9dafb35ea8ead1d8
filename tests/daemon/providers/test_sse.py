"""The SSE decoder both streaming providers share, without IO (providers/_sse.py)."""

from __future__ import annotations

import pytest

from roost.daemon.providers._sse import SSEDecoder


@pytest.mark.parametrize(("wire", "expected"), [
    pytest.param(
        (": comment\r\nevent: ping\r\ndata: {}\r\n\r\n"
         "event: message_delta\ndata: {\"a\":\ndata:  \"é\"}\nid: 7\n\n"
         "data: no-name\n\n").encode(),
        [("ping", "{}"), ("message_delta", '{"a":\n "é"}'), ("message", "no-name")],
        id="anthropic-like"),
    pytest.param(
        (": keep-alive\r\ndata: {\"a\":1}\r\n\r\n"
         "event: error\ndata: {\"b\":\ndata:  \"é\"}\nid: 7\n\n"
         "data: [DONE]\n\n").encode(),
        [("message", '{"a":1}'), ("error", '{"b":\n "é"}'), ("message", "[DONE]")],
        id="openai-like"),
])
def test_sse_decoder_handles_any_split_crlf_comments_and_multiline_data(
    wire: bytes, expected: list[tuple[str, str]],
) -> None:
    for size in (1, 2, 7, len(wire)):
        decoder = SSEDecoder()
        events = []
        for i in range(0, len(wire), size):
            events += decoder.feed(wire[i:i + size])
        assert events == expected, size


def test_an_event_without_its_blank_line_is_not_complete() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"event: ping\ndata: {}\n") == []
    assert decoder.feed(b"\n") == [("ping", "{}")]
    assert decoder.feed(b"\n\n") == []  # blank lines with no data are no event
