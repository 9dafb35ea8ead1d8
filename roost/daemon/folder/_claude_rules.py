"""Claude Code's rules: the ``*.md`` files under the user's ``~/.claude/rules`` and a
project's ``.claude/rules``.

    ---
    paths:
      - "src/api/**/*.ts"
      - "tests/**/*.{ts,tsx}"
    ---
    # API rules
    - Validate every input.

As Claude Code reads them (its memory page): every ``.md`` file under a ``rules`` folder,
subfolders included (in name order, a folder's files before its subfolders'), the user's
before the project's, so that the project's come later and weigh more. The project's are
read from its root's ``.claude/rules`` and from each folder between the root and the
session's folder, as the instruction files are.

- A rule without ``paths`` is an instruction like ``CLAUDE.md``: it goes into the
  instructions layer of every run (``_prompt``).
- A rule with ``paths`` (a glob or a list of globs, ``{a,b}`` braces expanded, relative to
  the folder that holds its ``.claude``; the user's relative to the project's root) applies
  only when the model works with a matching file. Claude Code loads such a rule into the
  context when it reads a matching file; roost adds its text to the result of the first
  call of a run whose file tool (read, write, edit) touches a matching path, once a run
  (see ``runs/_tool_calls``): the model sees it exactly when it first meets such a file, and
  a later run, or a run after a compaction, meets it again.

A rule is text for the model, as an instruction file is: a project's needs no trust. Each
file is read bounded, through the folder's reading (``_reading``): a project's rule file or
folder that leads out of the project is not read unless the user trusted the project (a
team's shared rules linked in), the user's own may lead anywhere. A link back to a folder
already walked is not walked again. A file whose front matter cannot be read is left out
and named in :attr:`ClaudeRules.problems`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from roost.loop import glob_matcher

from ._project import FrontMatterError, claude_user_dir, split_front_matter
from ._reading import FolderFiles

#: Rule files read from one ``rules`` folder, its subfolders included.
RULE_FILES = 500
#: Bytes a rule file may have, and characters of its text the model gets.
RULE_BYTES = 256 * 1024
RULE_CHARS = 20000
#: Patterns one ``paths`` entry may expand to (``{a,b}{c,d}`` is four).
BRACE_LIMIT = 64


@dataclass(frozen=True, slots=True)
class ClaudeRule:
    """One rule file."""

    #: The file, as found (links not resolved).
    source: str
    #: Its text after the front matter, cut to :data:`RULE_CHARS`.
    text: str
    #: The globs of its ``paths`` (braces expanded); empty: it always applies.
    paths: tuple[str, ...] = ()
    #: The folder the globs are relative to.
    base: str = ""
    #: The user's own.
    own: bool = False

    def matches(self, path: str) -> bool:
        """Whether the absolute ``path`` is one of the files the rule is about."""
        relative = os.path.relpath(path, self.base)
        if relative == ".." or relative.startswith("../"):
            return False
        return any(_matcher(glob)(relative) for glob in self.paths)


@dataclass(frozen=True, slots=True)
class ClaudeRules:
    """The rules of a folder's reading: those that always apply, and those with ``paths``."""

    always: tuple[ClaudeRule, ...] = ()
    scoped: tuple[ClaudeRule, ...] = ()
    #: Files that were not read, each with why.
    problems: tuple[str, ...] = ()

    def for_file(self, path: str) -> tuple[ClaudeRule, ...]:
        """The path-scoped rules about the absolute ``path``, in reading order."""
        return tuple(rule for rule in self.scoped if rule.matches(path))


def claude_rules_from(files: FolderFiles) -> ClaudeRules:
    """The user's and the project's rules for the folder ``files`` reads (see the module
    docstring). Blocking: call it in a worker thread."""
    found: list[ClaudeRule] = []
    problems: list[str] = []
    place = files.place
    user = claude_user_dir(files.environ) / "rules"
    _read_folder(files, user, place.root, own=True, into=found, problems=problems)
    folders = [place.root]
    cwd = Path(place.cwd)
    if cwd != place.root and cwd.is_relative_to(place.root):
        for part in cwd.relative_to(place.root).parts:
            folders.append(folders[-1] / part)
    mine = os.path.realpath(user)
    for folder in folders:
        rules = folder / ".claude" / "rules"
        # A project at the home folder: its .claude is the user's own (read above).
        if os.path.realpath(rules) != mine:
            _read_folder(files, rules, folder, own=False, into=found, problems=problems)
    return ClaudeRules(
        tuple(rule for rule in found if not rule.paths),
        tuple(rule for rule in found if rule.paths),
        tuple(problems),
    )


def _read_folder(
    files: FolderFiles, folder: Path, base: Path, *, own: bool, into: list[ClaudeRule], problems: list[str]
) -> None:
    if not os.path.isdir(folder):
        return
    for path in _rule_files(folder, None if own or files.trusted else files.place.root):
        try:
            data = files.read(path, RULE_BYTES, own=own)
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror or exc}")
            continue
        text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
        try:
            globs = _globs(text, str(path))
        except FrontMatterError as exc:
            problems.append(str(exc))
            continue
        if text.startswith("---"):
            text = split_front_matter(text, str(path))[1]
        body = text.strip()[:RULE_CHARS].strip()
        if body:
            into.append(ClaudeRule(str(path), body, globs, os.fspath(base), own))


def _rule_files(folder: Path, within: Path | None) -> list[Path]:
    """The ``*.md`` files under ``folder`` (hidden ones left out), links followed but never
    out of ``within`` (None: anywhere) nor twice into one folder, at most
    :data:`RULE_FILES`."""
    bound = os.path.realpath(within) if within is not None else None
    seen: set[str] = set()
    found: list[Path] = []
    for here, dirs, names in os.walk(folder, followlinks=True):
        real = os.path.realpath(here)
        if real in seen or (bound is not None and not _inside(real, bound)):
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(here, n) for n in sorted(names) if n.endswith(".md") and not n.startswith(".")]
        if len(found) >= RULE_FILES:
            return found[:RULE_FILES]
    return found


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _globs(text: str, source: str) -> tuple[str, ...]:
    """The globs of a rule file's ``paths`` (none without front matter).

    Raises:
        FrontMatterError: front matter that cannot be read, or ``paths`` not text.
    """
    if not text.startswith("---"):
        return ()
    meta, _ = split_front_matter(text, source)
    value = meta.get("paths")
    if value is None or value == "":
        return ()
    entries = [value] if isinstance(value, str) else value
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        raise FrontMatterError(f"{source}: paths must be a glob or a list of globs")
    globs: list[str] = []
    for entry in entries:
        # "src/**/*.ts, tests/**" on one line is two globs (a comma in braces is not).
        for part in _top_level(entry, ","):
            if part.strip():
                globs += braces(part.strip())
    return tuple(dict.fromkeys(globs))


def _top_level(text: str, separator: str) -> list[str]:
    """``text`` split at each ``separator`` outside braces."""
    parts, depth, last = [], 0, 0
    for i, char in enumerate(text):
        depth += (char == "{") - (char == "}" and depth > 0)
        if char == separator and depth == 0:
            parts.append(text[last:i])
            last = i + 1
    return [*parts, text[last:]]


def braces(pattern: str) -> list[str]:
    """``pattern`` with its ``{a,b}`` alternatives expanded (nested ones too), at most
    :data:`BRACE_LIMIT` patterns; a brace without a comma or without its close stays as
    written."""
    out = [pattern]
    done: list[str] = []
    while out:
        item = out.pop(0)
        found = _first_brace(item)
        if found is None:
            done.append(item)
        else:
            start, end, options = found
            out += [item[:start] + option + item[end + 1 :] for option in options]
        if len(done) + len(out) > BRACE_LIMIT:
            break
    return (done + out)[:BRACE_LIMIT]


def _first_brace(text: str) -> tuple[int, int, list[str]] | None:
    """The first ``{...}`` with a top-level comma: where it opens and closes, and its
    alternatives."""
    for start, char in enumerate(text):
        if char != "{":
            continue
        depth = 0
        commas: list[int] = []
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    if commas:
                        bounds = [start, *commas, i]
                        return start, i, [text[a + 1 : b] for a, b in zip(bounds, bounds[1:])]
                    break
            elif text[i] == "," and depth == 1:
                commas.append(i)
    return None


def _matcher(glob: str) -> Callable[[str], bool]:
    # A leading "/" is the base folder, as in gitignore-like globs.
    return glob_matcher(glob.lstrip("/"))
