"""git's ignore rules, read and applied as git applies them (``gitignore(5)``, ``dir.c``).

Where the patterns come from, the strongest first: the ``.gitignore`` of the path's own
folder, then of each folder above it up to the work tree's top (each relative to its
folder), then ``info/exclude`` of the repository, then the user's excludes file
(``core.excludesFile`` of the user's git config, by default ``$XDG_CONFIG_HOME/git/ignore``,
i.e. ``~/.config/git/ignore``). Within one file the last pattern that matches decides;
the first file with a matching pattern decides.

A line: blank, or ``#`` first, is nothing; a trailing ``\\r`` and trailing unescaped spaces
are dropped; ``!`` first negates (``\\!`` and ``\\#`` are the characters); a trailing ``/``
matches folders only; a pattern without any other ``/`` matches a path's last part at any
depth, and one with a ``/`` (a leading one too) is anchored to its file's folder.
Matching is :mod:`._wildmatch` (never backtracking: these patterns come from the
repository). A ``.gitignore`` that is a symlink is not read (git refuses it too); neither
is one over :data:`PATTERN_FILE_LIMIT` (logged; git's own limit is 100 MB).
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Mapping, Sequence

from ..folder._files import read_bounded
from ._gitconfig import config_values, expand_path, last_value, user_config_files
from ._wildmatch import Wildmatch

log = logging.getLogger(__name__)

#: Bytes of one pattern file read at most.
PATTERN_FILE_LIMIT = 1 << 20

_GLOB_SPECIAL = frozenset(b"*?[\\")


class Pattern:
    """One line of a pattern file, ready to test paths (relative to the work tree's top,
    as bytes) against it."""

    __slots__ = ("_base", "_ends_with", "_literal", "_matcher", "_must_be_dir", "_no_dir", "_prefix", "_text",
                 "negative")

    def __init__(self, line: bytes, base: bytes) -> None:
        self.negative = line.startswith(b"!")
        text = line[1:] if self.negative else line
        self._must_be_dir = text.endswith(b"/")
        length = len(text) - self._must_be_dir
        self._no_dir = b"/" not in text[:length]
        simple = _simple_length(text)
        self._ends_with = text.startswith(b"*") and _simple_length(text[1:]) == len(text) - 1
        prefix = min(simple, length)
        self._literal = prefix == length
        text = text[:length]
        if not self._no_dir and text.startswith(b"/"):
            text, prefix = text[1:], prefix - 1
        #: Where the pattern's file is, relative to the top, with its slash ("" at the top).
        self._base = base
        self._text, self._prefix = text, prefix
        self._matcher: Wildmatch | None = None

    def matches(self, path: bytes, name: bytes, is_dir: bool) -> bool:
        """Whether the pattern matches ``path`` (whose last part is ``name``), a folder
        when ``is_dir``."""
        if self._must_be_dir and not is_dir:
            return False
        if self._no_dir:
            if self._literal:
                return name == self._text
            if self._ends_with:
                return name.endswith(self._text[1:])
            return self._wild(False).match(name)
        base = self._base
        if base:
            if not path.startswith(base):
                return False
            path = path[len(base) :]
        prefix = self._prefix
        if prefix:
            if path[:prefix] != self._text[:prefix] or len(path) < prefix:
                return False
            if prefix == len(self._text) and prefix == len(path):
                return True
            path = path[prefix:]
        return self._wild(True).match(path)

    def _wild(self, pathname: bool) -> Wildmatch:
        # Compiled at its first use (most patterns of a large file never get this far),
        # from what the literal start leaves (git matches the rest on its own).
        if self._matcher is None:
            text = self._text if self._no_dir else self._text[self._prefix :]
            self._matcher = Wildmatch(text, pathname=pathname)
        return self._matcher


#: A folder's patterns, the last line first (the order they are tried in).
PatternList = tuple[Pattern, ...]


def parse_patterns(data: bytes, base: bytes) -> PatternList:
    """The patterns of a pattern file's bytes, last line first; ``base`` is its folder
    relative to the top, with a trailing slash ("" for the top)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    patterns = []
    for line in data.split(b"\n"):
        if not line or line.startswith(b"#"):
            continue
        line = _trim(line.removesuffix(b"\r"))
        if line.removeprefix(b"!").removesuffix(b"/"):  # an empty pattern matches nothing
            patterns.append(Pattern(line, base))
    return tuple(reversed(patterns))


def read_patterns(path: Path, base: bytes, *, follow: bool = True) -> PatternList:
    """The patterns of the file at ``path`` (none if it is missing, not a regular file, or,
    unless ``follow``, a symlink). Blocking."""
    try:
        if not follow and not stat.S_ISREG(os.lstat(path).st_mode):
            return ()
        data = read_bounded(path, PATTERN_FILE_LIMIT)
    except FileNotFoundError:
        return ()
    except OSError as exc:
        log.warning("ignore patterns not read: %s", exc)
        return ()
    return parse_patterns(data, base)


#: The patterns that hold for a folder: its own and its parents' (deepest first) as a
#: chain of ``(patterns, rest)`` pairs, ending in None.
Chain = tuple[PatternList, "Chain"] | None


def excluded(path: bytes, name: bytes, is_dir: bool, chain: Chain, outer: Sequence[PatternList]) -> bool:
    """Whether git ignores ``path`` (relative to the top; ``name`` its last part; a folder
    when ``is_dir``) under the folders' patterns ``chain`` and the repository-wide
    ``outer`` lists (strongest first)."""
    while chain is not None:
        patterns, chain = chain
        for pattern in patterns:
            if pattern.matches(path, name, is_dir):
                return not pattern.negative
    for patterns in outer:
        for pattern in patterns:
            if pattern.matches(path, name, is_dir):
                return not pattern.negative
    return False


def repository_patterns(common_dir: Path, cwd: Path, environ: Mapping[str, str]) -> list[PatternList]:
    """The patterns that hold for the whole work tree, strongest first: the repository's
    ``info/exclude``, then the user's excludes file (a relative ``core.excludesFile`` is
    relative to ``cwd``, where git would have run). Blocking."""
    return [read_patterns(common_dir / "info" / "exclude", b""), *_user_patterns(cwd, environ)]


def _user_patterns(cwd: Path, environ: Mapping[str, str]) -> list[PatternList]:
    pairs = [pair for file in user_config_files(environ) for pair in config_values(file, includes=True)]
    configured = last_value(pairs, "core.excludesfile")
    if configured is not None:
        return [read_patterns(cwd / expand_path(configured), b"")] if configured else []
    xdg = environ.get("XDG_CONFIG_HOME") or (f"{environ['HOME']}/.config" if environ.get("HOME") else "")
    return [read_patterns(Path(xdg) / "git" / "ignore", b"")] if xdg else []


def _simple_length(text: bytes) -> int:
    """How many bytes start ``text`` before its first wildcard or backslash."""
    for i, byte in enumerate(text):
        if byte in _GLOB_SPECIAL:
            return i
    return len(text)


def _trim(line: bytes) -> bytes:
    """``line`` without its trailing spaces, unless escaped (git's rule: a backslash
    keeps the byte after it; a lone one at the end keeps the spaces before it)."""
    last_space, i = None, 0
    while i < len(line):
        byte = line[i]
        if byte == ord(" "):
            if last_space is None:
                last_space = i
        elif byte == ord("\\"):
            i += 1
            if i >= len(line):
                return line
            last_space = None
        else:
            last_space = None
        i += 1
    return line if last_space is None else line[:last_space]
