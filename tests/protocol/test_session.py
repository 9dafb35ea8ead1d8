"""RpcSession (msgids, the pending table), result_of, and RpcError on the wire."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from roost.protocol import (
    ErrorCode,
    Notification,
    ProtocolError,
    Request,
    Response,
    RoostError,
    RpcError,
    RpcSession,
    encode,
    error_table,
    pack,
    parse,
    result_of,
)


def _sent(data: bytes) -> Request:
    message = parse(msgpack.unpackb(data, raw=False))
    assert isinstance(message, Request)
    return message


def test_request_bytes_carry_one_params_map() -> None:
    session = RpcSession()
    msgid, data = session.request("dispatch", {"task": "x"})
    assert _sent(data) == Request(msgid, "dispatch", [{"task": "x"}])
    _, data = session.request("status")
    assert _sent(data).params == [{}]


def test_msgids_increase_and_are_tracked() -> None:
    session = RpcSession()
    ids = [session.request("m", {})[0] for _ in range(5)]
    assert ids == sorted(set(ids))
    assert ids == list(range(ids[0], ids[0] + 5))
    assert session.pending == 5


def test_responses_matched_by_msgid_out_of_order() -> None:
    session = RpcSession()
    a, _ = session.request("a", {})
    b, _ = session.request("b", {})
    c, _ = session.request("c", {})
    note = Notification("event", [{"type": "x"}])
    data = encode(Response(c, None, "C")) + encode(note) + encode(Response(a, None, "A"))
    out = session.receive(data)
    assert out == [Response(c, None, "C"), note, Response(a, None, "A")]
    assert session.pending == 1
    assert session.receive(encode(Response(b, None, "B"))) == [Response(b, None, "B")]
    assert session.pending == 0


def test_response_split_across_reads() -> None:
    session = RpcSession()
    msgid, _ = session.request("a", {})
    data = encode(Response(msgid, None, {"big": "y" * 1000}))
    assert session.receive(data[:10]) == []
    assert session.receive(data[10:]) == [Response(msgid, None, {"big": "y" * 1000})]


def test_response_to_unknown_msgid_raises() -> None:
    session = RpcSession()
    with pytest.raises(ProtocolError):
        session.receive(encode(Response(99, None, None)))


def test_second_response_to_the_same_msgid_raises() -> None:
    session = RpcSession()
    msgid, _ = session.request("a", {})
    session.receive(encode(Response(msgid, None, 1)))
    with pytest.raises(ProtocolError):
        session.receive(encode(Response(msgid, None, 2)))


def test_request_from_the_daemon_raises() -> None:
    with pytest.raises(ProtocolError):
        RpcSession().receive(encode(Request(1, "m", [])))


def test_invalid_message_raises() -> None:
    with pytest.raises(ProtocolError):
        RpcSession().receive(pack({"not": "a message"}))


def test_garbage_raises() -> None:
    with pytest.raises(ProtocolError):
        RpcSession().receive(b"\xc1")


def test_frame_limit_applies() -> None:
    session = RpcSession(max_frame=100)
    msgid, _ = session.request("a", {})
    with pytest.raises(ProtocolError):
        session.receive(encode(Response(msgid, None, "z" * 500)))


def test_result_of_returns_result() -> None:
    assert result_of(Response(1, None, {"ok": True})) == {"ok": True}
    assert result_of(Response(1, None, None)) is None


def test_result_of_raises_rpc_error_from_wire_map() -> None:
    error = {"code": 10, "name": "SESSION_NOT_FOUND", "message": "no session s1", "data": {"id": "s1"}}
    with pytest.raises(RpcError) as info:
        result_of(Response(1, error, None))
    assert info.value.code == ErrorCode.SESSION_NOT_FOUND == 10
    assert info.value.message == "no session s1"
    assert info.value.data == {"id": "s1"}
    assert info.value.name == "SESSION_NOT_FOUND"
    assert str(info.value) == "no session s1"
    assert isinstance(info.value, RoostError)


def test_result_of_error_without_data() -> None:
    with pytest.raises(RpcError) as info:
        result_of(Response(1, {"code": 3, "message": "unknown method"}, None))
    assert info.value.data is None
    assert info.value.name == "UNKNOWN_METHOD"


@pytest.mark.parametrize("error", ["boom", 5, ["a"], {"message": "no code"}, {"code": "3"}], ids=repr)
def test_result_of_malformed_error_is_internal(error: Any) -> None:
    with pytest.raises(RpcError) as info:
        result_of(Response(1, error, None))
    assert info.value.code == ErrorCode.INTERNAL


@pytest.mark.parametrize("data", [None, {"k": [1, 2]}, "text", 0])
@pytest.mark.parametrize("code", list(ErrorCode))
def test_rpc_error_wire_roundtrip(code: ErrorCode, data: Any) -> None:
    error = RpcError(code, f"message for {code.name}", data)
    wire = error.to_wire()
    assert wire["code"] == int(code) and type(wire["code"]) is int
    assert wire["name"] == code.name
    assert ("data" in wire) == (data is not None)
    back = RpcError.from_wire(msgpack.unpackb(pack(wire), raw=False))
    assert (back.code, back.message, back.data, back.name) == (code, error.message, data, code.name)


def test_rpc_error_unknown_code() -> None:
    error = RpcError(12345, "from the future", {"x": 1})
    assert error.name == "UNKNOWN"
    wire = error.to_wire()
    assert wire == {"code": 12345, "name": "UNKNOWN", "message": "from the future", "data": {"x": 1}}
    back = RpcError.from_wire(wire)
    assert (back.code, back.message, back.data) == (12345, "from the future", {"x": 1})
    assert back.name == "UNKNOWN"
    assert "UNKNOWN" in repr(back)


def test_error_table_lists_every_code_once() -> None:
    table = error_table()
    assert [row["code"] for row in table] == [int(c) for c in ErrorCode]
    assert len({row["code"] for row in table}) == len(table)
    assert all(row["name"] == ErrorCode(row["code"]).name and row["doc"] for row in table)
    msgpack.packb(table)  # goes over the wire as is


def test_protocol_error_codes() -> None:
    from roost.protocol import FrameTooLarge

    assert ProtocolError.code == ErrorCode.INVALID_MESSAGE
    assert FrameTooLarge.code == ErrorCode.FRAME_TOO_LARGE
