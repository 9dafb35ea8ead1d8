"""The Decoder: bytes in, messages out, with a frame limit."""

from __future__ import annotations

import pytest

from roost.protocol import (
    DEFAULT_MAX_FRAME,
    Decoder,
    ErrorCode,
    FrameTooLarge,
    Notification,
    ProtocolError,
    Request,
    Response,
    encode,
    pack,
)

MESSAGES = [
    Request(0, "hello", [{"client": "test", "protocol": 1}]),
    Notification("event", [{"type": "text.delta", "text": "héllo", "seq": None}]),
    Response(0, None, {"api_level": 1, "methods": [{"name": "status"}]}),
    Response(1, {"code": 3, "message": "unknown method"}, None),
    Request(2**32 - 1, "dispatch", [{"task": "x" * 300, "blob": b"\x00" * 70000}]),
    Notification("lagged", [{"last_seq": 12}]),
]
STREAM = b"".join(encode(m) for m in MESSAGES)


def test_default_max_frame_is_16_mib() -> None:
    assert DEFAULT_MAX_FRAME == 16 * 1024 * 1024
    assert Decoder().max_frame == DEFAULT_MAX_FRAME


def test_whole_stream_in_one_feed() -> None:
    assert Decoder().feed(STREAM) == MESSAGES


def test_empty_feed_returns_nothing() -> None:
    decoder = Decoder()
    assert decoder.feed(b"") == []
    assert decoder.feed(STREAM) == MESSAGES


def test_split_at_every_byte_boundary() -> None:
    small = b"".join(encode(m) for m in MESSAGES[:4])
    for cut in range(len(small) + 1):
        decoder = Decoder()
        assert decoder.feed(small[:cut]) + decoder.feed(small[cut:]) == MESSAGES[:4], cut


def test_one_byte_at_a_time() -> None:
    small = b"".join(encode(m) for m in MESSAGES[:4])
    decoder = Decoder()
    out = []
    for i in range(len(small)):
        out += decoder.feed(small[i : i + 1])
    assert out == MESSAGES[:4]


def test_many_small_messages_in_one_feed_larger_than_max_frame() -> None:
    messages = [Notification("event", [{"seq": i, "text": "x" * 20}]) for i in range(500)]
    data = b"".join(encode(m) for m in messages)
    max_frame = 256
    assert len(data) > 40 * max_frame
    assert Decoder(max_frame).feed(data) == messages


def test_stream_far_larger_than_max_frame_in_odd_chunks() -> None:
    messages = [Request(i, "m", [{"i": i, "pad": "y" * (i % 90)}]) for i in range(300)]
    data = b"".join(encode(m) for m in messages)
    decoder = Decoder(200)
    out = []
    for start in range(0, len(data), 333):
        out += decoder.feed(data[start : start + 333])
    assert out == messages


def test_message_exactly_max_frame_is_fine() -> None:
    message = Notification("event", [{"text": "z" * 500}])
    data = encode(message)
    assert Decoder(len(data)).feed(data) == [message]
    # also when it comes after other messages in the same feed, and split up
    first = encode(Notification("a", []))
    decoder = Decoder(len(data))
    assert decoder.feed(first + data[:100]) == [Notification("a", [])]
    assert decoder.feed(data[100:]) == [message]


def test_one_message_over_max_frame_raises_frame_too_large() -> None:
    data = encode(Notification("event", [{"text": "z" * 5000}]))
    with pytest.raises(FrameTooLarge) as info:
        Decoder(1024).feed(data)
    assert info.value.code == ErrorCode.FRAME_TOO_LARGE
    assert isinstance(info.value, ProtocolError)


def test_one_byte_over_max_frame_raises() -> None:
    data = encode(Notification("event", [{"text": "z" * 500}]))
    with pytest.raises(FrameTooLarge):
        Decoder(len(data) - 1).feed(data)


def test_oversized_message_fed_in_pieces_raises() -> None:
    data = encode(Request(1, "m", [b"\x01" * 5000]))
    decoder = Decoder(1024)
    with pytest.raises(FrameTooLarge):
        for start in range(0, len(data), 100):
            decoder.feed(data[start : start + 100])


def test_oversized_message_after_good_ones_still_returns_nothing_partial() -> None:
    good = encode(Notification("ok", []))
    decoder = Decoder(1024)
    assert decoder.feed(good) == [Notification("ok", [])]
    with pytest.raises(FrameTooLarge):
        decoder.feed(encode(Notification("big", ["q" * 4000])))


def test_oversized_declared_length_raises_protocol_error() -> None:
    # a str header that claims 4 GiB: refused (as a ProtocolError of some kind)
    decoder = Decoder(1024)
    with pytest.raises(ProtocolError):
        decoder.feed(b"\x93\x02\xa1n\x91\xdb\xff\xff\xff\xff" + b"a" * 2000)


@pytest.mark.parametrize("junk", [b"\xc1", b"\x92\xc1", b"\x94\x00\x01\xa1m\xc1"], ids=repr)
def test_undecodable_bytes_raise_protocol_error(junk: bytes) -> None:
    with pytest.raises(ProtocolError) as info:
        Decoder().feed(junk)
    assert info.value.code == ErrorCode.INVALID_MESSAGE
    assert not isinstance(info.value, FrameTooLarge)


def test_undecodable_bytes_after_a_good_message_raise() -> None:
    decoder = Decoder()
    with pytest.raises(ProtocolError):
        decoder.feed(encode(Notification("ok", [])) + b"\xc1")


def test_unhashable_map_key_raises_protocol_error() -> None:
    # {[1]: 2}: valid msgpack, but a map key Python cannot hash
    with pytest.raises(ProtocolError):
        Decoder().feed(b"\x81\x91\x01\x02")


def test_deep_nesting_raises_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        Decoder().feed(b"\x91" * 100_000 + b"\xc0")


@pytest.mark.parametrize(
    "obj",
    [{"not": "a message"}, 42, [], [9, 1, "m", []], [0, True, "m", []], [2, "n", {}]],
    ids=repr,
)
def test_valid_msgpack_that_is_not_a_message_is_an_item(obj: object) -> None:
    before = Request(1, "a", [])
    after = Notification("b", [1])
    out = Decoder().feed(encode(before) + pack(obj) + encode(after))
    assert len(out) == 3
    assert out[0] == before
    assert isinstance(out[1], ProtocolError)
    assert out[2] == after


def test_bad_request_item_carries_its_msgid() -> None:
    out = Decoder().feed(pack([0, 17, "m", "not an array"]) + pack([0, 18, 5, []]))
    assert [getattr(e, "msgid", None) for e in out] == [17, 18]
    assert all(isinstance(e, ProtocolError) for e in out)


def test_decoder_keeps_going_after_a_bad_item_in_later_feeds() -> None:
    decoder = Decoder()
    assert isinstance(decoder.feed(pack("nope"))[0], ProtocolError)
    assert decoder.feed(encode(Notification("n", []))) == [Notification("n", [])]


def test_message_of_many_small_items_over_max_frame_raises() -> None:
    # msgpack parses incrementally, so no single item comes near the limit: the limit is
    # on the whole message, not on its largest piece
    data = encode(Notification("event", [["x" * 100] * 1000]))
    with pytest.raises(FrameTooLarge):
        Decoder(1024).feed(data)
    decoder = Decoder(1024)
    with pytest.raises(FrameTooLarge):
        for start in range(0, len(data), 500):
            decoder.feed(data[start : start + 500])


def test_nested_small_items_over_max_frame_raise() -> None:
    data = encode(Request(1, "m", [[[i] * 50 for i in range(100)]]))
    assert len(data) > 4000
    with pytest.raises(FrameTooLarge):
        Decoder(4000).feed(data)
    assert len(Decoder(len(data)).feed(data)) == 1
