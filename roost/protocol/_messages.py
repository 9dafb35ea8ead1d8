"""msgpack-RPC message kinds, as the spec defines them.

request ``[0, msgid, method, params]``, response ``[1, msgid, error, result]``,
notification ``[2, method, params]``. ``params`` is an array; roost's methods take one map,
so a call looks like ``[0, 7, "dispatch", [{"task": "..."}]]``.
"""

from __future__ import annotations

import _thread
from typing import Any, Mapping, NamedTuple, Sequence, Union

import msgpack

from ._errors import ProtocolError

REQUEST = 0
RESPONSE = 1
NOTIFICATION = 2

# Immutable named tuples rather than frozen dataclasses: every CLI command imports this
# module at start, and defining three slotted dataclasses (and importing dataclasses)
# costs ~3 ms of a ~60 ms `roost status` (bench/status_cli.py).


class Request(NamedTuple):
    """A call that expects a response with the same ``msgid``."""

    msgid: int
    method: str
    params: list[Any]


class Response(NamedTuple):
    """The answer to a request: exactly one of ``error`` and ``result`` is meaningful."""

    msgid: int
    error: Any
    result: Any


class Notification(NamedTuple):
    """A one-way message; roost's daemon sends events this way."""

    method: str
    params: list[Any]


Message = Union[Request, Response, Notification]


class Packed(NamedTuple):
    """A value already encoded (one msgpack value), sent as it is: a response's result
    made of stored events is never decoded and encoded again (see :func:`packed_map`)."""

    data: bytes


def pack(obj: Any) -> bytes:
    """Encode one object as msgpack, the way every roost peer does."""
    global _packing
    # ``packb`` makes a Packer (and its buffer) for every call: 0.41 µs for a small
    # response, 0.17 with one kept. Kept for the thread that imported this module (the
    # daemon's event loop, a client's main thread); other threads, and a pack inside a pack
    # (a signal handler), make their own.
    if _packing or _thread.get_ident() != _PACKER_THREAD:
        return msgpack.packb(obj, use_bin_type=True)
    _packing = True
    try:
        return _PACKER.pack(obj)
    finally:
        _packing = False


_new_tuple = tuple.__new__
_PACKER = msgpack.Packer(use_bin_type=True)
_PACKER_THREAD = _thread.get_ident()
_packing = False


def encode(message: Message) -> bytes:
    """Encode a message as one msgpack array (a :class:`Packed` result as it is)."""
    if isinstance(message, Request):
        return pack([REQUEST, message.msgid, message.method, message.params])
    if isinstance(message, Response):
        if isinstance(message.result, Packed):
            head = msgpack.Packer(use_bin_type=True).pack_array_header(4)
            return head + pack(RESPONSE) + pack(message.msgid) + pack(message.error) + message.result.data
        return pack([RESPONSE, message.msgid, message.error, message.result])
    return pack([NOTIFICATION, message.method, message.params])


def encode_response(msgid: int, error: Any, result: Any) -> bytes:
    """``encode(Response(msgid, error, result))``, without making the Response."""
    if isinstance(result, Packed):
        return encode(Response(msgid, error, result))
    return pack([RESPONSE, msgid, error, result])


def encode_packed(method: str, params: Sequence[bytes]) -> bytes:
    """A notification whose params are each given already encoded (one msgpack value
    apiece): the bytes :func:`encode` makes of ``Notification(method, [decoded, ...])``,
    without decoding and encoding again what is sent as stored."""
    return notification_head(method, len(params)) + b"".join(params)


def packed_map(fields: Mapping[str, Any]) -> Packed:
    """A map whose values are packed here, except :class:`Packed` ones, kept as they are."""
    packer = msgpack.Packer(use_bin_type=True)
    parts = [packer.pack_map_header(len(fields))]
    for key, value in fields.items():
        parts += (packer.pack(key), value.data if isinstance(value, Packed) else packer.pack(value))
    return Packed(b"".join(parts))


def packed_array(items: Sequence[bytes]) -> Packed:
    """An array of values each already packed."""
    return Packed(msgpack.Packer().pack_array_header(len(items)) + b"".join(items))


def notification_head(method: str, count: int) -> bytes:
    """The bytes a notification of ``count`` params starts with; the params, each encoded,
    follow (see :func:`encode_packed`)."""
    packer = msgpack.Packer(use_bin_type=True)
    return packer.pack_array_header(3) + packer.pack(NOTIFICATION) + packer.pack(method) + packer.pack_array_header(count)


def parse(obj: Any) -> Message:
    """Turn one decoded msgpack object into a message.

    Raises:
        ProtocolError: ``obj`` is not a well-formed msgpack-RPC message. Its ``msgid``
            attribute holds the request's msgid when one could be read, so the caller can
            answer that request with an error instead of dropping it.
    """
    if type(obj) is list and len(obj) == 4 and obj[0] == REQUEST and type(obj[0]) is int:
        # The usual message, checked at once (the checks below say what is wrong otherwise).
        msgid, method, params = obj[1], obj[2], obj[3]
        if type(msgid) is int and 0 <= msgid < 2**32 and type(method) is str and type(params) is list:
            return _new_tuple(Request, (msgid, method, params))  # Request(...) without its __new__
    if not isinstance(obj, (list, tuple)) or not obj:
        raise ProtocolError("a message must be a non-empty array")
    kind = obj[0]
    if not isinstance(kind, int) or isinstance(kind, bool):
        # 0.0 == 0 and True == 1 in Python; the spec's message type is an integer.
        raise ProtocolError("message type must be an integer")
    if kind == REQUEST and len(obj) == 4:
        _, msgid, method, params = obj
        if not _is_msgid(msgid):
            raise ProtocolError("request msgid must be an unsigned 32-bit integer")
        if not isinstance(method, str):
            raise _with_msgid(ProtocolError("request method must be a string"), msgid)
        if not isinstance(params, (list, tuple)):
            raise _with_msgid(ProtocolError("request params must be an array"), msgid)
        return Request(msgid, method, list(params))
    if kind == RESPONSE and len(obj) == 4:
        _, msgid, error, result = obj
        if not _is_msgid(msgid):
            raise ProtocolError("response msgid must be an unsigned 32-bit integer")
        return Response(msgid, error, result)
    if kind == NOTIFICATION and len(obj) == 3:
        _, method, params = obj
        if not isinstance(method, str) or not isinstance(params, (list, tuple)):
            raise ProtocolError("notification must be [2, str method, array params]")
        return Notification(method, list(params))
    raise ProtocolError("not a msgpack-RPC request, response or notification")


def _is_msgid(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**32


def _with_msgid(error: ProtocolError, msgid: int) -> ProtocolError:
    error.msgid = msgid  # type: ignore[attr-defined]
    return error
