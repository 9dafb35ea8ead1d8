"""Property tests: the Decoder never fails with anything but ProtocolError, and every
well-formed message survives encode + decode however the bytes are split."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from roost.protocol import (
    Decoder,
    Message,
    Notification,
    ProtocolError,
    Request,
    Response,
    encode,
    pack,
)

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)  # NaN != NaN would fail equality, not the protocol
    | st.text(max_size=40)
    | st.binary(max_size=40)
)
keys = (
    st.text(max_size=10)
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.binary(max_size=10)
)
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(keys, children, max_size=5),
    max_leaves=15,
)
msgids = st.integers(min_value=0, max_value=2**32 - 1)
methods = st.text(max_size=30)
params = st.lists(values, max_size=4)
messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(Request, msgids, methods, params),
    st.builds(Response, msgids, values, values),
    st.builds(Notification, methods, params),
)


# Byte soup that looks like msgpack: headers of maps, arrays, strings, ext types and
# timestamps, so that random input reaches deeper into the unpacker than uniform bytes do.
_TOKENS = [
    b"\x80", b"\x81", b"\x82", b"\x90", b"\x91", b"\x92", b"\x93", b"\x94",
    b"\x00", b"\x01", b"\x02", b"\xff", b"\xc0", b"\xc1", b"\xc2", b"\xc3",
    b"\xa1a", b"\xa5event", b"\xc4\x02", b"\xd9\x03", b"\xcb", b"\xcf",
    b"\xd4\xff", b"\xd6\xff", b"\xd7\xff", b"\xc7\x0c\xff", b"\xc7\x05\xff",
    b"\xdc\xff\xff", b"\xde\x00\x02", b"\xdb\xff\xff\xff\xff", b"\xdd\x00\x01\x00\x00",
]
msgpackish = st.lists(st.sampled_from(_TOKENS) | st.binary(max_size=3), max_size=60).map(b"".join)
# Valid msgpack of any shape, messages or not; tuple keys pack as arrays, which Python
# cannot hash when decoded.
any_objects = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(keys | st.tuples(scalars), children, max_size=4),
    max_leaves=15,
)


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in zip(bounds, bounds[1:])]


def _feed_all(decoder: Decoder, pieces: list[bytes]) -> list[Any]:
    """Feed pieces until the decoder refuses the stream; check every item's type."""
    out: list[Any] = []
    for piece in pieces:
        try:
            items = decoder.feed(piece)
        except ProtocolError:
            return out  # fatal, and the right kind of failure: stop feeding
        for item in items:
            assert isinstance(item, (Request, Response, Notification, ProtocolError)), item
        out += items
    return out


@FUZZ
@given(data=st.binary(max_size=600), cuts=st.lists(st.integers(min_value=0), max_size=6))
def test_random_bytes_give_messages_or_protocol_errors(data: bytes, cuts: list[int]) -> None:
    _feed_all(Decoder(), _chunks(data, cuts))


@FUZZ
@given(
    data=st.binary(max_size=600),
    cuts=st.lists(st.integers(min_value=0), max_size=6),
    max_frame=st.integers(min_value=1, max_value=300),
)
def test_random_bytes_small_frames(data: bytes, cuts: list[int], max_frame: int) -> None:
    _feed_all(Decoder(max_frame), _chunks(data, cuts))


@FUZZ
@given(data=msgpackish, cuts=st.lists(st.integers(min_value=0), max_size=6))
def test_msgpackish_bytes_give_messages_or_protocol_errors(data: bytes, cuts: list[int]) -> None:
    _feed_all(Decoder(), _chunks(data, cuts))


@FUZZ
@given(
    objs=st.lists(any_objects, min_size=1, max_size=4),
    cuts=st.lists(st.integers(min_value=0), max_size=6),
)
def test_any_msgpack_objects_give_messages_or_protocol_errors(objs: list[Any], cuts: list[int]) -> None:
    data = b"".join(pack(o) for o in objs)
    _feed_all(Decoder(), _chunks(data, cuts))


@FUZZ
@given(
    prefix=st.lists(messages, max_size=3),
    junk=st.binary(min_size=1, max_size=200),
    cuts=st.lists(st.integers(min_value=0), max_size=6),
)
def test_good_messages_then_junk(prefix: list[Message], junk: bytes, cuts: list[int]) -> None:
    data = b"".join(encode(m) for m in prefix) + junk
    out = _feed_all(Decoder(), _chunks(data, cuts))
    # whatever the junk does, the good messages before it come out first and intact (a
    # feed that raises loses what it decoded: the connection is over anyway)
    n = min(len(out), len(prefix))
    assert out[:n] == prefix[:n]


@FUZZ
@given(
    batch=st.lists(messages, min_size=1, max_size=5),
    cuts=st.lists(st.integers(min_value=0), max_size=10),
    tight=st.booleans(),
)
def test_messages_roundtrip_in_any_chunking(batch: list[Message], cuts: list[int], tight: bool) -> None:
    encoded = [encode(m) for m in batch]
    # tight: the frame limit is exactly the largest message, which must still pass
    decoder = Decoder(max(len(e) for e in encoded)) if tight else Decoder()
    out: list[Any] = []
    for piece in _chunks(b"".join(encoded), cuts):
        out += decoder.feed(piece)
    assert out == batch
