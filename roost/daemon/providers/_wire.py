"""Small pieces both HTTP providers need: request bodies as JSON, error message wording."""

from __future__ import annotations

import json
from collections.abc import Mapping, Set
from typing import Any


def _jsonable(value: Any) -> Any:
    # Only for what json cannot write itself (dicts, lists and tuples it writes directly,
    # without a copy): other mappings and collections, as dicts and lists.
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, Set):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


#: How the official SDK writes a body: UTF-8 left as is, no spaces, no NaN.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_jsonable)


def json_body(value: Any) -> bytes:
    """``value`` (dicts, lists, tuples, any mapping, plain values) as a JSON request body.

    Raises:
        ValueError: it holds a value JSON cannot carry (NaN, an object of another kind).
    """
    try:
        return _ENCODER.encode(value).encode()
    except TypeError as exc:
        raise ValueError(str(exc)) from None


def json_text(value: Any) -> str:
    """``value`` as JSON text in json's default layout (``", "``, ``": "``), UTF-8 kept."""
    return json.dumps(value, ensure_ascii=False, default=_jsonable)


def short(text: str, limit: int = 300) -> str:
    """``text`` on one line, cut to ``limit`` characters (for error messages)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def after_retries(n: int) -> str:
    """`` (after N retries)`` for an error message, or nothing when there were none."""
    if n == 0:
        return ""
    return f" (after {n} {'retry' if n == 1 else 'retries'})"
