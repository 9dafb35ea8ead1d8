"""Every event's data is made valid text where the event is made: a lone surrogate anywhere
in it (a key, a list in a tuple, a str subclass) becomes U+FFFD, and the rest is kept."""

from __future__ import annotations

import enum

import msgpack

from roost.loop import safe_text


class Color(str, enum.Enum):
    RED = "r\ud800d"


def test_a_lone_surrogate_anywhere_is_replaced_and_everything_else_kept() -> None:
    data = {
        "text": "half a pair: \ud800",
        "k\udcff": 1,
        "content": ({"type": "text", "text": "ok"}, ["deep \udfff", 2.5, None, True, b"\xff"]),
        "caf\u00e9": "na\u00efve",
        "color": Color.RED,
        3: "three",
    }
    clean = safe_text(data)
    assert clean == {
        "text": "half a pair: \ufffd",
        "k\ufffd": 1,
        "content": [{"type": "text", "text": "ok"}, ["deep \ufffd", 2.5, None, True, b"\xff"]],
        "caf\u00e9": "na\u00efve",
        "color": "r\ufffdd",
        3: "three",
    }
    msgpack.packb(clean)  # what could not be encoded before now can
    assert data["text"] == "half a pair: \ud800"  # the caller's data is not changed


def test_text_already_fine_is_returned_as_it_is() -> None:
    text = "plain \u00e9 text"
    assert safe_text(text) is text
    assert safe_text(42) == 42
