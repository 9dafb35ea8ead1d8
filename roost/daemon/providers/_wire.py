"""Small pieces both HTTP providers need: plain JSON values and error message wording."""

from __future__ import annotations

from typing import Any, Mapping


def plain(value: Any) -> Any:
    """Mappings and sequences as plain dicts and lists, so that they serialize as JSON."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def short(text: str, limit: int = 300) -> str:
    """``text`` on one line, cut to ``limit`` characters (for error messages)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def after_retries(n: int) -> str:
    """`` (after N retries)`` for an error message, or nothing when there were none."""
    if n == 0:
        return ""
    return f" (after {n} {'retry' if n == 1 else 'retries'})"
