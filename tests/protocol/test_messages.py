"""Message kinds: encode and parse round trips, and what parse refuses."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from roost.protocol import (
    Notification,
    ProtocolError,
    Request,
    Response,
    encode,
    encode_packed,
    pack,
    packed_array,
    packed_map,
    parse,
)


def _roundtrip(message: Any) -> Any:
    return parse(msgpack.unpackb(encode(message), raw=False, strict_map_key=False))


@pytest.mark.parametrize(
    "message",
    [
        Request(0, "hello", [{"client": "test", "protocol": 1}]),
        Request(2**32 - 1, "dispatch", [{"task": "x", "nested": {"a": [1, 2.5, None, True]}}]),
        Request(7, "status", []),
        Request(8, "raw", [b"\x00\xff", "ü", -1, 2**63]),
        Response(0, None, {"ok": True}),
        Response(5, {"code": 3, "message": "no such method"}, None),
        Response(2**32 - 1, None, [1, "two", b"3"]),
        Response(9, None, None),
        Notification("event", [{"type": "text.delta", "text": "hi"}]),
        Notification("lagged", []),
    ],
    ids=repr,
)
def test_encode_parse_roundtrip(message: Any) -> None:
    assert _roundtrip(message) == message


def test_wire_shapes_follow_the_spec() -> None:
    assert msgpack.unpackb(encode(Request(3, "m", [{"a": 1}]))) == [0, 3, "m", [{"a": 1}]]
    assert msgpack.unpackb(encode(Response(3, None, "r"))) == [1, 3, None, "r"]
    assert msgpack.unpackb(encode(Notification("n", [1]))) == [2, "n", [1]]


def test_a_notification_of_packed_params_is_the_same_bytes_as_encoded_whole() -> None:
    event = {"type": "tool.finished", "seq": 7, "result": "x" * 70000, "raw": b"\x00"}
    assert encode_packed("event", [pack(event)]) == encode(Notification("event", [event]))
    many = [{"n": i} for i in range(20)]
    assert encode_packed("event", [pack(e) for e in many]) == encode(Notification("event", many))


def test_pack_uses_bin_type_for_bytes() -> None:
    # bytes stay bytes and str stays str across the wire
    assert msgpack.unpackb(pack([b"ab", "ab"]), raw=False) == [b"ab", "ab"]


def test_tuples_are_accepted_and_params_become_lists() -> None:
    assert parse((0, 1, "m", ("a",))) == Request(1, "m", ["a"])
    assert parse([2, "n", ()]) == Notification("n", [])


@pytest.mark.parametrize(
    "obj",
    [
        None,
        {},
        "hello",
        7,
        [],
        [0],
        [0, 1, "m"],  # request, missing params
        [0, 1, "m", [], "extra"],
        [1, 1, None],  # response, missing result
        [1, 1, None, None, None],
        [2, "n"],  # notification, missing params
        [2, "n", [], None],
        [3, 1, "m", []],  # unknown kind
        [-1, 1, "m", []],
        ["0", 1, "m", []],
        [None, 1, "m", []],
        [True, 1, None, None],  # a bool is not a message kind
        [0.0, 1, "m", []],  # nor is a float
        [2, 5, []],  # notification method not a str
        [2, b"event", []],
        [2, "n", {}],  # notification params not an array
        [2, "n", "params"],
        [2, "n", None],
    ],
    ids=repr,
)
def test_invalid_messages_raise_protocol_error(obj: Any) -> None:
    with pytest.raises(ProtocolError):
        parse(obj)


@pytest.mark.parametrize(
    "msgid", [True, False, -1, 2**32, 2**64 - 1, 1.0, "1", None, b"\x01", [1]], ids=repr
)
@pytest.mark.parametrize("kind", [0, 1])
def test_bad_msgid_is_refused_without_a_msgid(kind: int, msgid: Any) -> None:
    obj = [0, msgid, "m", []] if kind == 0 else [1, msgid, None, None]
    with pytest.raises(ProtocolError) as info:
        parse(obj)
    # nothing to answer: the msgid could not be read
    assert getattr(info.value, "msgid", None) is None


@pytest.mark.parametrize("msgid", [0, 1, 2**32 - 1])
def test_msgid_bounds_accepted(msgid: int) -> None:
    assert parse([0, msgid, "m", []]).msgid == msgid
    assert parse([1, msgid, None, None]).msgid == msgid


@pytest.mark.parametrize(
    "obj",
    [
        [0, 42, 5, []],  # method not a str
        [0, 42, b"hello", []],  # method is bin, not str
        [0, 42, None, []],
        [0, 42, "m", {}],  # params not an array
        [0, 42, "m", "p"],
        [0, 42, "m", None],
    ],
    ids=repr,
)
def test_bad_request_with_readable_msgid_carries_it(obj: Any) -> None:
    with pytest.raises(ProtocolError) as info:
        parse(obj)
    assert info.value.msgid == 42  # type: ignore[attr-defined]


def test_a_result_packed_beforehand_is_sent_as_it_is() -> None:
    stored = [pack({"type": "a", "seq": 1}), pack({"type": "b", "seq": 2, "x": "y" * 5000})]
    result = packed_map({"events": packed_array(stored), "last_seq": 2})
    whole = {"events": [{"type": "a", "seq": 1}, {"type": "b", "seq": 2, "x": "y" * 5000}], "last_seq": 2}
    assert encode(Response(9, None, result)) == encode(Response(9, None, whole))
