"""Reading git's config files as data: the few values the file listing needs.

The listing needs two values: ``core.excludesFile`` (where the user keeps patterns every
repository ignores) from the user's own config files, and ``extensions.objectFormat``
(how long an object name is in the index) from a repository's. Nothing here runs a
program or acts on what a value means beyond that: the parser only turns ``[section]``
and ``key = value`` lines into pairs.

The user's files are read as git reads them (``/etc/gitconfig``, then
``$XDG_CONFIG_HOME/git/config``, then ``~/.gitconfig``; the last value wins), following
their ``include.path`` (they are the user's own). A repository's config is read without
its includes: what a repository names is never followed. ``includeIf`` is not followed
anywhere, and ``GIT_CONFIG_*`` variables are not consulted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from ..folder._files import read_bounded

#: Bytes of one config file read at most; includes nest at most this deep (git's limit).
CONFIG_LIMIT = 1 << 20
INCLUDE_DEPTH = 10

_ESCAPES = {"n": "\n", "t": "\t", "b": "\b", "\\": "\\", '"': '"'}


def config_values(path: Path, *, includes: bool, depth: int = 0) -> list[tuple[str, str | None]]:
    """The ``(section[.subsection].key, value)`` pairs of the config file at ``path``, in
    order (section and key in lower case; ``None``: a key without ``=``). A file that is
    missing, not a regular file or too large gives nothing. With ``includes``, the pairs
    of each ``include.path`` come where it stands (a relative path is relative to the
    including file's folder; ``~/`` is the home folder)."""
    try:
        data = read_bounded(path, CONFIG_LIMIT)
    except OSError:  # missing, unreadable, not a regular file, too large: git would say so
        return []
    pairs: list[tuple[str, str | None]] = []
    for key, value in _parse(data.decode("utf-8", "surrogateescape")):
        if includes and key == "include.path" and value and depth < INCLUDE_DEPTH:
            included = Path(expand_path(value))
            pairs += config_values(path.parent / included, includes=True, depth=depth + 1)
        else:
            pairs.append((key, value))
    return pairs


def user_config_files(environ: Mapping[str, str]) -> list[Path]:
    """The user's config files, in the order git reads them (later ones win)."""
    files = [Path("/etc/gitconfig")]
    home = environ.get("HOME")
    xdg = environ.get("XDG_CONFIG_HOME")
    if xdg:
        files.append(Path(xdg) / "git" / "config")
    elif home:
        files.append(Path(home) / ".config" / "git" / "config")
    if home:
        files.append(Path(home) / ".gitconfig")
    return files


def last_value(pairs: list[tuple[str, str | None]], key: str) -> str | None:
    """The value ``key`` has last in ``pairs`` (None: never set, or set without ``=``)."""
    found = None
    for name, value in pairs:
        if name == key:
            found = value
    return found


def expand_path(value: str) -> str:
    """A path value as git reads it: ``~/`` and ``~user/`` expanded."""
    return os.path.expanduser(value) if value.startswith("~") else value


def _parse(text: str) -> list[tuple[str, str | None]]:
    """The pairs of a config file's text; lines git would refuse are skipped."""
    pairs: list[tuple[str, str | None]] = []
    section = ""
    lines = text.removeprefix("\ufeff").split("\n")
    at = 0
    while at < len(lines):
        line = lines[at].strip()
        at += 1
        if line.startswith("["):
            header, line = _section(line)
            if header is None:
                continue
            section = header
            line = line.strip()
        if not line or line[0] in "#;" or not section:
            continue
        name, equals, rest = line.partition("=")
        name = name.strip()
        if not name or not (name[0].isalpha() and all(c.isalnum() or c == "-" for c in name)):
            continue
        if not equals:
            pairs.append((f"{section}.{name.lower()}", None))
            continue
        value, more = _value(rest)
        while more and at < len(lines):  # a backslash at the end continues the line
            tail, more = _value(lines[at], joined=bool(value))
            value += tail
            at += 1
        pairs.append((f"{section}.{name.lower()}", value))
    return pairs


def _section(line: str) -> tuple[str | None, str]:
    """The section a ``[...]`` header opens (None: not a header git reads), and what
    follows it on the line."""
    close = line.find("]")
    quote = line.find('"')
    if quote != -1 and quote < close:  # [section "sub section"]: the subsection as written
        name = line[1:quote].strip()
        sub, i = "", quote + 1
        while i < len(line) and line[i] != '"':
            if line[i] == "\\" and i + 1 < len(line):
                i += 1
            sub += line[i]
            i += 1
        if i >= len(line) or not line[i + 1 :].lstrip().startswith("]"):
            return None, ""
        rest = line[i + 1 :].lstrip()[1:]
        return (f"{name.lower()}.{sub}" if name else None), rest
    if close == -1:
        return None, ""
    name = line[1:close].strip()
    if not name:
        return None, ""
    # [section.sub] (old syntax): the subsection in lower case.
    return name.lower(), line[close + 1 :]


def _value(text: str, joined: bool = False) -> tuple[str, bool]:
    """A value's text as git reads it (quotes, escapes, comments, spaces), and whether a
    backslash at its end continues it on the next line. ``joined``: the text continues a
    value, so its leading blanks are inside it."""
    out: list[str] = []
    quoted, spaces, i = False, 0, 0
    text = text if joined else text.lstrip()
    while i < len(text):
        c = text[i]
        i += 1
        if c.isspace() and not quoted:
            spaces += 1 if out or joined else 0
            continue
        if not quoted and c in "#;":
            break
        out.append(" " * spaces)
        spaces = 0
        if c == "\\":
            if i >= len(text):
                return "".join(out), True
            out.append(_ESCAPES.get(text[i], ""))
            i += 1
        elif c == '"':
            quoted = not quoted
        else:
            out.append(c)
    return "".join(out), False
