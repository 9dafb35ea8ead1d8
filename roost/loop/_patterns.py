"""Glob patterns over POSIX paths, shared by the permission rules and the file tools.

``*`` and ``?`` stay within one path segment (and match dotfiles), ``[...]`` is a
character class, and a ``**`` segment spans any number of folders. Matching runs in time
linear in the path (RE2; see ``_regex``), whatever the pattern.
"""

from __future__ import annotations

import functools
import re
from typing import Callable

from ._regex import linear_regex


@functools.lru_cache(maxsize=512)
def glob_matcher(pattern: str) -> Callable[[str], bool]:
    """A test of POSIX paths against the glob ``pattern`` (see the module docstring)."""
    parts = pattern.removeprefix("./").split("/")
    regex = ""
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if part == "**":
            regex += ".*" if last else "(?:[^/]*/)*"
        else:
            regex += _segment(part) + ("" if last else "/")
    # Linear: a pattern of a project's deny rule (``**/**/**/...``) must not hold the loop.
    compiled = linear_regex(regex, dot_all=True)
    return lambda path: compiled.fullmatch(path) is not None


def _segment(part: str) -> str:
    out, i = "", 0
    while i < len(part):
        c = part[i]
        if c == "*":
            out += "[^/]*"
            while part[i + 1 : i + 2] == "*":
                i += 1
        elif c == "?":
            out += "[^/]"
        elif c == "[":
            # As in fnmatch: a leading ! negates, and a ] right after [ or [! is literal.
            start = i + 2 if part[i + 1 : i + 2] == "!" else i + 1
            close = part.find("]", start + 1 if part[start : start + 1] == "]" else start)
            if close == -1:
                out += re.escape(c)
            else:
                body = re.sub(r"([\\^\[\]&~|])", r"\\\1", part[start:close])
                out += f"[{'^/' if start == i + 2 else ''}{body}]"
                i = close
        else:
            out += re.escape(c)
        i += 1
    return out
