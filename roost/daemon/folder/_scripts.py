"""Which project files a widening entry runs, so that trust binds them with the entry.

A trusted hook ``bash "$CLAUDE_PROJECT_DIR"/.claude/hooks/check.sh`` or an MCP server
``python tools/server.py`` is only as trusted as the file it runs: trust records their
digests beside the entry's own file (see ``_trust``), and an entry applies only while each
is as it was trusted.

What counts, precisely:

- **The words.** A hook's command is read with the permission rules' bash parser
  (:func:`roost.loop.judge`): every word of every simple command it runs (pipelines,
  lists, ``bash -c`` strings, ``env``/``nohup``/... unwrapped), the program as written
  included, and the value of ``--option=value``; the files a redirection writes
  (``> log``) are not words. An MCP server's command and args are read the same way (so
  ``bash -c "..."`` is read too), and a command without a ``/`` also as the program it is
  on the ``PATH`` the server gets (absolute entries only). ``$CLAUDE_PROJECT_DIR`` and
  ``${CLAUDE_PROJECT_DIR}`` (quoted or not) stand for the project's root; a word with any
  other variable, ``$(...)`` or a glob is only known when it runs, and is left out.
- **Where a relative word points.** A hook runs in the session's folder: a relative word is
  taken from there and from the project's root (a hook written for Claude Code expects the
  root). An MCP server's words are taken from its ``cwd``. ``~`` is the home folder.
- **What is recorded.** For a path inside the project's root (as named, or once symlinks
  are followed): a regular file's content digest, whatever its name; ``ABSENT`` (see
  ``_trust``) when nothing is there and the word is written as a path (``./x``, ``/x``,
  ``~/x``, ``$CLAUDE_PROJECT_DIR/x``) or names a file in a folder that exists
  (``tools/server.py``; not ``@scope/package``); ``OUTSIDE`` and where it leads for a path
  named in the project that a link leads out of it (the target is not a project file and is
  not bound by content, but retargeting the link is a change); ``""`` for anything else
  there (a FIFO, a device, a file over :data:`SCRIPT_LIMIT` or one that cannot be read),
  which cannot be trusted. A folder records nothing (``uv run --directory .``) unless trust
  recorded a file there: a file replaced by a folder is a change. Paths outside the root
  (``/usr/bin/env``, ``~/bin/x``) are the user's machine: not bound.
- **What binds.** A word holding a ``/`` is bound whatever is there: the entry applies only
  while trust recorded the path as it is now, so rewriting, removing or creating the file
  (``bash ./later.sh`` before ``later.sh`` exists) makes it someone else's word again. A
  bare word (``python server.py``) binds the file trust recorded when the folder was
  trusted; a file of that name created since binds nothing until the user trusts the folder
  again (it is shown, and recorded then), so that ``touch hook-ran`` does not untrust its
  own hook by running.
- **Limits.** What a named program reads on its own (``make``'s Makefile, ``npm run``'s
  package.json, ``python -m pkg``) is not named, so not bound: the sandbox protects the
  project's configuration folders, and a trusted project's hooks run in the sandbox. A bare
  word naming a script that was missing when the folder was trusted is not bound. An entry
  that names a file it changes itself (``tee notes.txt``, a server's ``--db ./data.db``) is
  bound to the file as trusted and stops applying once it changed it: write such files from
  the script, or name them through a variable.

Reads are bounded and never block (regular files only, streamed, at most
:data:`SCRIPT_LIMIT` bytes); callers run these functions in a worker thread, as the
loaders do. Given what one reading recorded so far (``seen``), a file named by several
entries is read once (see ``_reading``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import stat
from typing import Iterable, Iterator, MutableMapping, NamedTuple

from roost.loop import WILD, judge

from ._files import open_regular
from ._trust import ABSENT, DIGEST, OUTSIDE, Script, Trust

#: Bytes a script may have to be bound (a bundled server's JavaScript can be large).
SCRIPT_LIMIT = 64 << 20

#: The project's root in a command, as Claude Code's hooks name it.
_PROJECT_DIR = re.compile(r"\$\{CLAUDE_PROJECT_DIR\}|\$CLAUDE_PROJECT_DIR(?![A-Za-z0-9_])")
#: What stands for the root while the line is parsed: a plain word in any quoting.
_ROOT_MARK = "__roost_project_dir__"
#: Text only known when the command runs (the parser's WILD stands for some).
_UNKNOWN = re.compile(r"[$`*?\[" + WILD + "]")


class Word(NamedTuple):
    """A word of an entry's command that may name a file it runs."""

    #: As written (quotes removed), ``$CLAUDE_PROJECT_DIR`` kept.
    text: str
    #: It holds a ``/`` (``./x``, ``tools/x.py``, ``$CLAUDE_PROJECT_DIR/x``): a file it
    #: names is bound whenever it is there; a bare word's only once trust recorded it.
    path: bool


def shell_words(command: str) -> list[Word]:
    """The words of a shell line that may name files it runs (see the module docstring)."""
    line = _PROJECT_DIR.sub(_ROOT_MARK, command)
    judged = judge(line)
    words: list[str] = []
    for found in judged.commands:
        if found.program:
            words.append(found.program)
        if not found.wrapper:
            words += found.words[0 if not found.program else 1 :]
    if not judged.whole:
        # Not understood whole: every word of it, redirections' targets too (more is safer).
        words += _plain_words(line)
    named = [_known(word.partition("=")[2] if word.startswith("-") else word) for word in dict.fromkeys(words)]
    found_words = [Word(text, _is_path(text)) for text in named if text]
    # After `cd tools`, ./run.sh is tools/run.sh: a relative word is also taken from there.
    moved = [_known(c.words[1]) for c in judged.commands if c.words[0] in ("cd", "pushd") and len(c.words) > 1]
    relative = [w for w in found_words if not w.text.startswith(("/", "~", "$"))]
    return found_words + [Word(os.path.join(d, w.text), w.path) for d in moved if d for w in relative]


def argv_words(argv: Iterable[str]) -> list[Word]:
    """The words of a program and its arguments that may name files it runs."""
    return shell_words(shlex.join(argv))


def scripts(
    words: Iterable[Word],
    root: str | os.PathLike[str],
    bases: Iterable[str],
    trust: Trust,
    seen: MutableMapping[str, str] | None = None,
) -> tuple[Script, ...]:
    """What trust records for the project files ``words`` name, each marked trusted or not.

    ``bases``: the folders a relative word is taken from, in order. ``seen``: what each
    real path was recorded as earlier in the same reading (read from and added to), so that
    a project cannot make one reading hash a large file for each of a thousand hooks. Reads
    files.
    """
    found: dict[str, Script] = {}
    real_root = os.path.realpath(root)
    for path, word, absent in _paths(words, os.fspath(root), list(dict.fromkeys(bases))):
        if path in found:
            continue
        known = trust.knows(path)
        recorded = _record(path, os.fspath(root), real_root, absent, known=known, seen=seen)
        if recorded is None:
            continue
        # A bare word's file that trust never saw (`touch hook-ran` made it) binds nothing.
        bound = word.path or known or not recorded.startswith(DIGEST)
        found[path] = Script(path, recorded, trust.holds(path, recorded) or not bound, bound)
    return tuple(found.values())


def named_files(words: Iterable[Word], root: str | os.PathLike[str], bases: Iterable[str]) -> list[str]:
    """The real paths of the regular files inside ``root`` that ``words`` name (no content
    read)."""
    return project_files((path for path, _, _ in _paths(words, os.fspath(root), list(bases))), root)


def project_files(paths: Iterable[str], root: str | os.PathLike[str]) -> list[str]:
    """The real paths of those of ``paths`` that are regular files inside ``root`` (symlinks
    followed), each once."""
    real_root = os.path.realpath(root)
    reals = (os.path.realpath(path) for path in dict.fromkeys(paths) if os.path.isfile(path))
    return list(dict.fromkeys(real for real in reals if _inside(real, real_root)))


def _record(
    path: str,
    root: str,
    real_root: str,
    absent: bool = True,
    *,
    known: bool = True,
    seen: MutableMapping[str, str] | None = None,
) -> str | None:
    """What trust records for ``path`` of the project ``root`` (really ``real_root``) now:
    a digest, ABSENT, OUTSIDE and where it leads, ``""`` (cannot be bound), or None
    (nothing to bind).

    ``absent``: a missing path is ABSENT (else nothing); ``known``: trust recorded the path
    (then a missing one is ABSENT, and a folder there ``""``: changes); ``seen``: see
    :func:`scripts`. Reads the file.
    """
    if not (absent or known or os.path.lexists(path)):
        return None  # most words name nothing (`bash`, `--fast`): one stat says so
    real = os.path.realpath(path)
    if not _inside(real, real_root):
        # Named inside the project, leading out: a link of the project's (or a folder of
        # it) leads there, and is bound to where it leads.
        return OUTSIDE + real if _inside(os.path.normpath(path), os.path.normpath(root)) else None
    try:
        info = os.stat(real)
    except FileNotFoundError:
        return ABSENT if absent or known else None
    except OSError:
        return ""
    if stat.S_ISDIR(info.st_mode):
        return "" if known else None
    if seen is not None and real in seen:
        return seen[real]
    recorded = _digest(real)
    if seen is not None:
        seen[real] = recorded
    return recorded


def unchanged(path: str, root: str, recorded: str) -> bool:
    """Whether ``path`` is still what trust recorded for it (``root``: its project)."""
    if recorded == ABSENT or recorded.startswith(OUTSIDE):
        return _record(path, root, os.path.realpath(root)) == recorded
    # A file of the entry's own (a config file) is bound by content wherever it leads.
    return _digest(path) == recorded


def _known(word: str) -> str:
    """``word`` with the root's mark as ``$CLAUDE_PROJECT_DIR``; ``""`` when it holds text
    only known when the command runs."""
    if _UNKNOWN.search(word.replace(_ROOT_MARK, "")):
        return ""
    return word.replace(_ROOT_MARK, "$CLAUDE_PROJECT_DIR")


def _is_path(word: str) -> bool:
    return "/" in word and "://" not in word and not any(c.isspace() for c in word)


def _written_as_path(word: str) -> bool:
    return word.startswith(("./", "../", "/", "~/", "$CLAUDE_PROJECT_DIR", "${CLAUDE_PROJECT_DIR}"))


def _paths(words: Iterable[Word], root: str, bases: list[str]) -> Iterator[tuple[str, Word, bool]]:
    """Each word as absolute paths (one per base for a relative word), and whether naming
    nothing there is recorded (ABSENT): a path written as one (``./x``, ``/x``, ``~/x``,
    ``$CLAUDE_PROJECT_DIR/x``), or one whose folder exists (``tools/server.py`` where there
    is a ``tools``, not ``@scope/package`` or ``owner/repo``)."""
    for word in words:
        named = os.path.expanduser(_PROJECT_DIR.sub(lambda _: root, word.text))
        found = [named] if os.path.isabs(named) else [os.path.join(base, named) for base in bases]
        for path in map(os.path.normpath, found):
            yield path, word, word.path and (_written_as_path(word.text) or os.path.isdir(os.path.dirname(path)))


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _digest(path: str) -> str:
    """The content digest of a regular file (``""``: it cannot be bound)."""
    try:
        fd = open_regular(path)
    except OSError:
        return ""
    try:
        hasher, size = hashlib.sha256(), 0
        while chunk := os.read(fd, 1 << 20):
            size += len(chunk)
            if size > SCRIPT_LIMIT:
                return ""
            hasher.update(chunk)
    except OSError:
        return ""
    finally:
        os.close(fd)
    return DIGEST + hasher.hexdigest()


def _plain_words(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:
        return line.split()
