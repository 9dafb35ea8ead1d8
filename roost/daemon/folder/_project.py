"""Where things are: a project's root, the user's and the project's agent and skill
folders, instruction and memory files; and the front matter that agent and skill files share.

The project root decides where a project's files are looked for and what ``roost trust``
records, so it follows version control first: the nearest folder at or above the working
directory with ``.git`` (a folder, or a file in a git worktree), ``.hg`` or ``.jj``. Outside
version control it is the nearest folder with ``.roost`` or ``.claude``, except that the
home folder's ``.claude`` is the user's own (Claude Code keeps its settings there), never a
sign that ``$HOME`` is a project; else the working directory itself.

Front matter is read as Claude Code reads it: strict YAML first; when that fails, one
``key: value`` a line, the value being the rest of the line (so an unquoted ``description:
Use this agent when: ...`` loads, as it does in Claude Code). A UTF-8 byte order mark and
Windows line ends are no reason to refuse a file.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, NamedTuple, TypeVar

import platformdirs

from ._files import read_head

T = TypeVar("T")

#: Bytes of a SKILL.md read for its front matter and body.
SKILL_LIMIT = 256 * 1024
#: Bytes of a SKILL.md read to list it (its front matter).
SKILL_HEAD = 32 * 1024
#: What marks a folder under version control (``.git`` may be a worktree's file).
VCS_MARKERS = (".git", ".hg", ".jj")
#: Agent files read from one agent folder, its subfolders included.
AGENT_FILES = 1000


class FrontMatterError(ValueError):
    """A file whose front matter cannot be read; the message names the file and line."""


class Folder(NamedTuple):
    """A folder roost reads agents or skills from."""

    path: Path
    #: The user's own (in their home or config dir): it needs no trust.
    own: bool


class Skill(NamedTuple):
    """A skill: a folder with a SKILL.md."""

    description: str
    #: Its SKILL.md.
    path: Path
    #: From the user's own folders: its files need no trust.
    own: bool


def user_config_file() -> Path:
    """``config.toml`` in the user config dir (``~/.config/roost``)."""
    return Path(platformdirs.user_config_dir("roost", appauthor=False)) / "config.toml"


def claude_home() -> Path:
    """The user's Claude Code folder, ``~/.claude`` (agents, skills, CLAUDE.md)."""
    return Path.home() / ".claude"


def claude_user_dir(environ: Mapping[str, str]) -> Path:
    """The user's Claude Code folder as Claude Code finds its settings and commands:
    ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    return Path(environ.get("CLAUDE_CONFIG_DIR") or os.path.expanduser("~/.claude"))


@dataclass(frozen=True, slots=True)
class Place:
    """Where a session works: its folder, and the project it is in, as one reading of the
    folder found them (see ``_reading``)."""

    cwd: str
    #: The project's root (see :func:`project_root`).
    root: Path
    #: The user trusted the project (its files may lead out of it).
    trusted: bool = False
    #: The enabled Claude Code plugins' skill folders: (the plugin's name, a folder of
    #: skill folders); their skills are ``plugin:skill``.
    plugin_skills: tuple[tuple[str, str], ...] = ()


def project_root(cwd: str | None) -> Path | None:
    """The project ``cwd`` is in: the nearest folder at or above it under version control,
    else the nearest with ``.roost`` or ``.claude`` (never ``$HOME`` for its ``.claude``),
    else ``cwd`` itself.

    A reading of a folder looks once (see ``_reading``) and hands the root on: outside a
    repository each look walks up to ``/``.
    """
    if not cwd:
        return None
    return _look_for_root(cwd)


def _look_for_root(cwd: str) -> Path:
    start = Path(cwd)
    folders = (start, *start.parents)
    # Joined as strings: Path joins were ~40% of a look.
    names = [os.fspath(folder) for folder in folders]
    for folder, name in zip(folders, names):
        if any(os.path.lexists(os.path.join(name, marker)) for marker in VCS_MARKERS):
            return folder
    for folder, name in zip(folders, names):
        if os.path.exists(os.path.join(name, ".roost")) or (
            os.path.exists(os.path.join(name, ".claude")) and not _is_home(folder)
        ):
            return folder
    return start


def _is_home(folder: Path) -> bool:
    return os.path.realpath(folder) == os.path.realpath(Path.home())


def project_config_file(root: Path | None) -> Path | None:
    """The ``.roost/config.toml`` of the project at ``root``, if there is one."""
    if root is None:
        return None
    path = root / ".roost" / "config.toml"
    # Not is_file(): a FIFO or a dangling link there is an error to report, not "no file".
    return path if os.path.lexists(path) else None


def agent_dirs(root: Path | None) -> list[Folder]:
    """Where agent files are read, lowest precedence first: ``~/.claude/agents``,
    ``~/.config/roost/agents``, then the ``.claude/agents`` and ``.roost/agents`` of the
    project at ``root`` (None: no project)."""
    return _folders(root, "agents")


def skill_dirs(root: Path) -> list[Folder]:
    """Folders holding skill folders (each with a SKILL.md), lowest precedence first, as
    :func:`agent_dirs`."""
    return _folders(root, "skills")


def _folders(root: Path | None, kind: str) -> list[Folder]:
    own = [claude_home() / kind, user_config_file().parent / kind]
    project = [root / ".claude" / kind, root / ".roost" / kind] if root is not None else []
    # A project at $HOME (a dotfiles repository) has the user's ~/.claude as its own: it
    # stays the user's.
    mine = {os.path.realpath(path) for path in own}
    return [Folder(path, True) for path in own] + [
        Folder(path, False) for path in project if os.path.realpath(path) not in mine
    ]


def agent_files(folder: Path) -> list[Path]:
    """The ``*.md`` files of an agent folder and its subfolders (hidden ones and links to
    folders left out), a folder's own files before its subfolders', at most
    ``AGENT_FILES + 1`` (more than ``AGENT_FILES`` is for the caller to report)."""
    found: list[Path] = []
    for here, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found += [Path(here, name) for name in sorted(files) if name.endswith(".md") and not name.startswith(".")]
        if len(found) > AGENT_FILES:
            return found[: AGENT_FILES + 1]
    return found


def find_skills(
    root: str | os.PathLike[str], trusted: bool = False, plugins: tuple[tuple[str, str], ...] = ()
) -> dict[str, Skill]:
    """The skills of the project at ``root`` and the user's, by name; later folders
    override earlier. ``plugins``: the enabled plugins' skill folders (see
    :attr:`Place.plugin_skills`), the user's own, their skills named ``plugin:skill``.

    A SKILL.md whose front matter cannot be read is named after its folder; one that is not
    a regular file, or (unless the folder is ``trusted``) leads out of the project, is left
    out. Reads files: call it in a worker thread.
    """
    found: dict[str, Skill] = {}
    root = Path(root)
    folders = [(f"{name}:", Folder(Path(path), True)) for name, path in plugins]
    for prefix, folder in folders + [("", folder) for folder in skill_dirs(root)]:
        if not folder.path.is_dir():
            continue
        within = None if trusted or folder.own else root
        for skill in sorted(folder.path.glob("*/SKILL.md")):
            try:
                text = read_head(skill, SKILL_HEAD, within=within).decode("utf-8", errors="replace")
            except OSError:
                continue
            try:
                meta, _ = split_front_matter(text, str(skill))
            except FrontMatterError:
                meta = {}
            name = prefix + str(meta.get("name") or skill.parent.name)
            found[name] = Skill(str(meta.get("description", "")).strip(), skill, folder.own)
    return found


def read_skill(path: Path, within: Path | None) -> str:
    """A SKILL.md's text (bounded; ``within``: the folder it must not lead out of)."""
    return read_head(path, SKILL_LIMIT, within=within).decode("utf-8", errors="replace").removeprefix("\ufeff")


def memory_files(root: Path) -> dict[str, Path]:
    """The memory files: ``user`` (in the config dir) and ``project`` (in the ``.roost/`` of
    the project at ``root``)."""
    return {"user": user_config_file().parent / "MEMORY.md", "project": root / ".roost" / "MEMORY.md"}


def split_front_matter(text: str, source: str, texts: frozenset[str] = frozenset()) -> tuple[dict[str, Any], str]:
    """The front matter between ``---`` lines, and the body after it.

    Strict YAML first, then (as Claude Code does) one ``key: value`` a line. The fields
    named in ``texts`` are text, as Claude Code takes them: the rest of their line as
    written, whatever YAML would make of it (``argument-hint: [file] [focus]``).

    Raises:
        FrontMatterError: no front matter, or front matter that neither reading makes a map
            of (the message names the line).
    """
    import yaml

    text = text.removeprefix("\ufeff").replace("\r\n", "\n")
    if not text.startswith("---"):
        raise FrontMatterError(f"{source}:1: no front matter: the file must start with a --- line")
    end = text.find("\n---", 3)
    if end == -1:
        raise FrontMatterError(f"{source}:1: the front matter has no closing --- line")
    block = text[3:end]
    body = text[end + 4 :].lstrip("-").strip()
    try:
        meta = yaml.safe_load(block) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        strict_line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc)
        try:
            return _lenient(block, texts), body
        except _LineError as bad:
            # The strict parser's words are the better ones when it stumbled on that line too.
            why = problem if bad.line == strict_line else bad.why
            raise FrontMatterError(f"{source}:{bad.line}: bad YAML: {why}") from None
    if not isinstance(meta, dict):
        raise FrontMatterError(f"{source}:2: the front matter must be a map of fields")
    return _as_text(meta, block, texts), body


#: A ``key: value`` line of the lenient reading (the value may be empty).
_KEY_LINE = re.compile(r"([A-Za-z_][\w-]*)[ \t]*:(?:[ \t]+(.*))?$")
#: YAML's block scalar indicators: ``|`` keeps line ends, ``>`` folds them.
_BLOCK_SCALARS = ("|", "|-", "|+", ">", ">-", ">+")


class _LineError(Exception):
    """A front matter line the lenient reading cannot use."""

    def __init__(self, line: int, why: str) -> None:
        super().__init__(f"line {line}: {why}")
        self.line = line
        self.why = why


def _as_text(meta: dict[str, Any], block: str, texts: frozenset[str]) -> dict[str, Any]:
    """``meta`` with the fields named in ``texts`` as their lines have them (a field that
    goes on over more lines keeps what YAML made of it, as text)."""
    if not texts:
        return meta
    written = {}
    for line in block.split("\n"):
        match = _KEY_LINE.match(line)
        if match and match[1] in texts and match[1] not in written:
            written[match[1]] = (match[2] or "").strip()
    for key in texts & meta.keys():
        raw = written.get(key, "")
        if raw and raw not in _BLOCK_SCALARS and not isinstance(meta[key], str):
            meta[key] = raw
        elif meta[key] is not None and not isinstance(meta[key], str):
            meta[key] = str(meta[key])
    return meta


def _lenient(block: str, texts: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Front matter read one ``key: value`` a line, the value being the rest of the line.

    Indented lines after a key continue its value: ``- item`` lines make a list, others
    join the text (or a ``|`` / ``>`` block). A value that reads as a YAML scalar, or a
    ``[...]`` / ``{...}`` collection, is that; any other is the text as written, as is
    the value of a field named in ``texts``.

    Raises:
        _LineError: a line that is none of these, or a ``[`` / ``{`` that does not close.
    """
    meta: dict[str, Any] = {}
    key: tuple[str, str, int] | None = None
    more: list[str] = []
    # The block starts right after the opening ---: its first piece is the rest of line 1.
    for number, line in enumerate(block.split("\n")[1:], start=2):
        if not line.strip() or line.startswith("#"):
            continue
        match = _KEY_LINE.match(line)
        if match:
            if key is not None:
                meta[key[0]] = _value(key[1], more, key[2], key[0] in texts)
            key, more = (match[1], (match[2] or "").strip(), number), []
        elif key is not None and line[0] in " \t-":
            more.append(line)
        else:
            raise _LineError(number, "not a key: value line")
    if key is not None:
        meta[key[0]] = _value(key[1], more, key[2], key[0] in texts)
    return meta


def _value(raw: str, more: list[str], line: int, text_only: bool = False) -> Any:
    """The value of one key: the rest of its line and the lines that continue it
    (``text_only``: as written)."""
    if raw in _BLOCK_SCALARS:
        lines = [part.strip() for part in more]
        return ("\n" if raw[0] == "|" else " ").join(lines)
    if not raw and more and not text_only and all(part.strip().startswith("- ") for part in more):
        return [_scalar(part.strip()[2:].strip(), line) for part in more]
    text = " ".join([raw, *(part.strip() for part in more)]).strip()
    if text_only:
        return text
    return _scalar(text, line) if text else None


def _scalar(text: str, line: int) -> Any:
    import yaml

    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        if text.startswith(("[", "{")):
            raise _LineError(line, "a list or map that does not close") from None
        return text
    # "when: the user asks" reads as a map, "- x" as a list: they were meant as text.
    if isinstance(value, (dict, list)) and not text.startswith(("[", "{")):
        return text
    return value


def taking_turns(first: list[T], second: list[T]) -> list[T]:
    """``first`` and ``second`` taking turns (the rest of the longer one after): where a
    list of the user's and the project's things is cut, neither crowds the other out."""
    turns: list[T] = []
    for pair in zip(first, second):
        turns += pair
    return turns + first[len(second):] + second[len(first):]
