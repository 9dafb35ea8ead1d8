"""Text from files, a model or a command made safe for a terminal, in one place: what
every command prints of it passes here. Each pattern is compiled at its first use, so that
a light command (``roost status``) pays only for what it prints."""

from __future__ import annotations

import functools
import re


@functools.cache
def _control() -> re.Pattern[str]:
    # Control characters: C0 but tab and newline, DEL, C1. Without ESC (and C1's CSI, OSC
    # and DCS) no escape sequence is left, so a model's text or a command's output can
    # neither write the clipboard (OSC 52), plant links (OSC 8) nor move the cursor.
    return re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` without control characters but tab and newline: safe for a terminal."""
    # A control character is never printable: most text needs no pattern (nor its compiling).
    return text if text.isprintable() else _control().sub("", text)


@functools.cache
def _hiding() -> re.Pattern[str]:
    # What could hide or reorder text on one line: every control character (newline and
    # tab too), the bidirectional overrides and isolates, zero-width characters and
    # separators.
    return re.compile(r"[\x00-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]")


def visible(text: str) -> str:
    """``text`` on one line with whatever could hide or reorder a part of it shown as an
    escape (``\\n``, ``\\x1b``, ``\\u202e``): for what a person is asked to trust."""
    if text.isprintable():  # none of them is printable (categories Cc, Cf, Zl and Zp)
        return text
    return _hiding().sub(lambda m: m.group().encode("unicode_escape").decode(), text)
