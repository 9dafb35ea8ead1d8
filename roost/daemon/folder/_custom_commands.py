"""Custom slash commands: Claude Code's ``.claude/commands/*.md`` and skills, typed as ``/name args``.

    ---
    description: Review a file
    argument-hint: [file] [focus]
    allowed-tools: Bash(git diff:*), Read
    model: haiku
    ---
    Review $0, paying attention to $1. The changes: !`git diff --stat`

Where they come from (:func:`commands_from`), lowest precedence first: the user's
``~/.claude/commands`` (``$CLAUDE_CONFIG_DIR`` moves it), the project's ``.claude/commands``
(at its root), then the skills of both (a SKILL.md is a command too, as in Claude Code,
unless its front matter says ``user-invocable: false``; a skill wins over a command of its
name). Another folder of commands can be added as a :class:`CommandFolder` with a prefix
(a plugin's ``commands``: ``/plugin:name``); an enabled Claude Code plugin's commands come
first, scope ``plugin`` (see ``_plugins``), its ``${CLAUDE_PLUGIN_ROOT}`` replaced.

Names, as Claude Code gives them: a file's name without ``.md`` is the command
(``frontend/component.md`` is ``/component``; ``svelte/svelte:storybook.md`` is
``/svelte:storybook``); its folders only tell it apart, so ``/frontend:component`` (the
full name) finds it too, and is needed when two commands share a name.

Front matter is optional and read as Claude Code reads it: ``description`` (else the body's
first line) and ``argument-hint`` are text as written (``[file] [focus]`` is not a YAML
list); ``model`` (Claude Code's names understood); ``allowed-tools`` (a list, or text);
``arguments`` (names for ``$name``). Expansion is ``_command_text``'s.

``allowed-tools`` widens what runs without asking (Claude Code approves those calls while
the command runs): the user's own commands' apply, a project's only where the user trusted
the file as it is (:attr:`CommandSet.widening`; ``roost trust``). A file that cannot be used
is skipped with one line naming it and why (:attr:`CommandSet.problems`).
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from ._command_text import name_list, tool_list
from ._plugins import plugins_from
from ._files import read_head
from ._project import SKILL_HEAD, FrontMatterError, claude_user_dir, find_skills, read_skill, skill_dirs, split_front_matter
from ._reading import FolderFiles
from ._review import rule_warnings
from ._trust import NO_TRUST, Trust, Widening, digest

#: Bytes a command file may have, and command files read per folder.
COMMAND_LIMIT = 256 * 1024
MAX_COMMANDS = 1000
#: Front matter fields that are text whatever YAML makes of them.
_TEXT_FIELDS = frozenset({"description", "argument-hint", "model", "name"})
#: ``/name rest``: a name of letters, digits, ``_ - . :``, then nothing or white space
#: (``/etc/hosts is broken`` is a task, not a command).
_INVOCATION = re.compile(r"/(\w[\w.:-]*)(?:\s+(.*))?", re.S)
_PART = re.compile(r"\w[\w.:-]*")
#: How many names an unknown command's error suggests.
_SUGGESTED = 8


@dataclass(frozen=True, slots=True)
class CustomCommand:
    """One command file (or skill)."""

    #: Its full name: the path under the commands folder, ``:`` between folders.
    name: str
    body: str
    description: str = ""
    argument_hint: str = ""
    #: The run's model unless the dispatch names one (None: as usual).
    model: str | None = None
    allowed_tools: tuple[str, ...] = ()
    source: str = ""
    #: ``user``, ``project`` or ``plugin``.
    scope: str = "project"
    #: The name typed for it: its file's name (a plugin's too: ``plugin:name`` also finds it).
    short: str = ""
    #: Names of its arguments (``$name``), in order.
    arguments: tuple[str, ...] = ()
    #: ``allowed-tools`` applies: the user's own file, or one the user trusted as it is.
    granted: bool = False
    #: ``command`` or ``skill`` (a skill's body is read when it is invoked: ``body`` is "").
    kind: str = "command"

    def describe(self, short: bool) -> dict[str, Any]:
        """The command as ``commands.list`` shows it (``short``: its short name finds it)."""
        return {
            "name": self.name,
            "short": self.short if short else None,
            "description": self.description,
            "argument_hint": self.argument_hint,
            "model": self.model,
            "allowed_tools": list(self.allowed_tools),
            "source": self.source,
            "scope": self.scope,
            "kind": self.kind,
        }


@dataclass(frozen=True, slots=True)
class CommandFolder:
    """A folder of command files: ``scope`` says whose; ``prefix`` (a plugin's name) goes
    before each name (``plugin:name``)."""

    path: Path
    scope: str
    prefix: str = ""
    #: A plugin's folder: ``${CLAUDE_PLUGIN_ROOT}`` in its files.
    root: str = ""

    @property
    def own(self) -> bool:
        """The user's own files (a plugin the user installed is too): read wherever they
        lead, their ``allowed-tools`` applied."""
        return self.scope != "project"


class UnknownCommand(LookupError):
    """No command, or more than one, goes by a name; the message says which there are."""


@dataclass(frozen=True, slots=True)
class CommandSet:
    """The custom commands for a folder, by full name, and the files that could not be used."""

    commands: Mapping[str, CustomCommand]
    #: Each file skipped, and one line naming it and why.
    skipped: tuple[tuple[str, str], ...] = ()
    #: The project's commands' ``allowed-tools``, trusted or not (see ``_trust``).
    widening: tuple[Widening, ...] = field(default=())

    @property
    def problems(self) -> tuple[str, ...]:
        """One line for each file skipped: its path, and why."""
        return tuple(line for _, line in self.skipped)

    def find(self, name: str) -> CustomCommand:
        """The command ``/name`` means: the one of that full name, else the only one whose
        short name it is.

        Raises:
            UnknownCommand: none, or several.
        """
        if name in self.commands:
            return self.commands[name]
        scope, _, last = name.rpartition(":")
        matches = [
            c for c in self.commands.values()
            if c.short == name or (scope and c.short == last and c.name.startswith(scope + ":"))
        ]
        if len(matches) == 1:
            return matches[0]
        if matches:
            names = ", ".join("/" + c.name for c in matches)
            raise UnknownCommand(f"/{name} could be any of {names}: type the full name")
        raise UnknownCommand(self._unknown(name))

    def _unknown(self, name: str) -> str:
        """What an unknown ``/name`` is told: the file of that name that was skipped, or a
        few names like it; never the whole list (``roost commands`` shows that)."""
        last = name.rsplit(":", 1)[-1]
        for path, problem in self.skipped:
            file = Path(path)
            if (file.parent.name if file.name == "SKILL.md" else file.stem) == last:
                return f"/{name} cannot be used: {problem}"
        typed = sorted({"/" + self.typed(c) for c in self.commands.values()})
        if not typed:
            known = "no commands here"
        elif len(typed) <= _SUGGESTED:
            known = "commands here: " + ", ".join(typed)
        else:
            close = difflib.get_close_matches("/" + name, typed, 3, 0.6)
            known = f"did you mean {' or '.join(close)}? " if close else ""
            known += f"{len(typed)} commands here: roost commands"
        skipped = f"; {len(self.problems)} files skipped: roost commands" if self.problems else ""
        return f"no custom command /{name} ({known}{skipped}); a task that starts with // is sent with one / as it is"

    def typed(self, command: CustomCommand) -> str:
        """The shortest name that finds ``command``."""
        if command.short == command.name:
            return command.name
        alone = sum(1 for c in self.commands.values() if c.short == command.short) == 1
        return command.short if alone and command.short not in self.commands else command.name

    def with_skills(self, skills: Iterable[CustomCommand]) -> CommandSet:
        """The set with ``skills`` (a skill wins over a command of its name, as in Claude
        Code)."""
        return replace(self, commands={**self.commands, **{skill.name: skill for skill in skills}})

    def describe(self) -> list[dict[str, Any]]:
        """Every command as ``commands.list`` shows it, by name."""
        return [c.describe(self.typed(c) == c.short) for _, c in sorted(self.commands.items())]


def load_commands(cwd: str, environ: Mapping[str, str], trust: Trust = NO_TRUST) -> CommandSet:
    """The commands for a session in ``cwd``: the commands alone (a folder's whole setup
    reads them with the rest: see :func:`commands_from`). Reads files: call it in a worker
    thread."""
    return commands_from(FolderFiles(cwd, environ, trust))


def command_folders(files: FolderFiles) -> list[CommandFolder]:
    """The user's and the project's command folders, lowest precedence first."""
    user = claude_user_dir(files.environ) / "commands"
    folders = [CommandFolder(user, "user")]
    project = files.place.root / ".claude" / "commands"
    # A project at the home folder: its .claude is the user's own.
    if os.path.realpath(project) != os.path.realpath(user):
        folders.append(CommandFolder(project, "project"))
    return folders


def commands_from(files: FolderFiles, more: Iterable[CommandFolder] = ()) -> CommandSet:
    """The command files for a session in the folder ``files`` reads: the user's and the
    project's command folders, then ``more`` folders (a plugin's); a trusted project's
    files may lead out of it. Skills are not read here (see :func:`find_skill`)."""
    reading = _Reading(files)
    # The enabled plugins' commands first: named /plugin:command (see _plugins).
    plugins = [
        CommandFolder(place, "plugin", plugin.name, plugin.root)
        for plugin in plugins_from(files).active
        for place in plugin.commands
    ]
    for folder in [*plugins, *command_folders(files), *more]:
        reading.folder(folder)
    return CommandSet(reading.commands, tuple(reading.skipped), tuple(reading.widening))


class _Reading:
    """The commands one :func:`commands_from` has read so far."""

    def __init__(self, files: FolderFiles) -> None:
        self.files = files
        self.commands: dict[str, CustomCommand] = {}
        self.skipped: list[tuple[str, str]] = []
        self.widening: list[Widening] = []

    def folder(self, folder: CommandFolder) -> None:
        # A plugin.json may name one command file rather than a folder of them.
        single = folder.path.is_file()
        for path in [folder.path] if single else self._files(folder.path):
            parts = (path.stem,) if single else path.relative_to(folder.path).with_suffix("").parts
            if not all(_PART.fullmatch(part) for part in parts):
                self.skipped.append((str(path), f"{path}: a command's name is letters, digits and _ - . : (no spaces)"))
                continue
            # A plugin's commands go by their own names too, while no other has the name
            # (Claude Code: "the plugin prefix is optional unless there are collisions").
            short = parts[-1]
            name = ":".join(p for p in (folder.prefix, *parts) if p)
            self._read(path, folder.scope, folder.own, (name, short), "command", folder.root)

    def _read(self, path: Path, scope: str, own: bool, names: tuple[str, str] | None, kind: str, root: str = "") -> None:
        """Read the command at ``path`` (``names``: its full and short name; a skill's
        come from its front matter or folder; ``root``: its plugin's folder)."""
        try:
            data = self.files.read(path, COMMAND_LIMIT, own=own)
            data = data.replace(b"${CLAUDE_PLUGIN_ROOT}", root.encode()) if root else data
            command = _parse(names, data, path, scope, own, kind)
            if command is not None and not own and command.allowed_tools:
                # Bound to the content read: trust covers this file as it is.
                command = replace(command, granted=self.files.trust.covers(path, data))
        except FrontMatterError as exc:
            self.skipped.append((str(path), str(exc)))
            return
        except (OSError, UnicodeDecodeError) as exc:
            self.skipped.append((str(path), f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}"))
            return
        if command is None:
            return
        self.commands[command.name] = command
        if scope == "project" and command.allowed_tools:
            self.widening += [
                Widening(
                    "allow rule", tool, f"allowed-tools of /{command.short}", str(path), digest(data), command.granted,
                    warnings=rule_warnings(tool),
                )
                for tool in command.allowed_tools
            ]

    def _files(self, folder: Path) -> list[Path]:
        """The ``.md`` files under ``folder`` (links to folders not followed), at most
        MAX_COMMANDS of them."""
        found: list[Path] = []
        for top, dirs, names in os.walk(folder):
            dirs.sort()
            found += [Path(top) / f for f in sorted(names) if f.endswith(".md")]
            if len(found) > MAX_COMMANDS:
                self.skipped.append((str(folder), f"{folder}: more than {MAX_COMMANDS} command files; the rest are not read"))
                return found[:MAX_COMMANDS]
        return found


def find_skill(root: Path, trusted: bool, name: str, *, named: bool = False) -> CustomCommand | None:
    """The skill ``/name`` invokes, as a command (None: none users may type goes by it).

    Reads the SKILL.md of the skill folder of that name; with ``named``, when there is
    none, every skill's head (a skill may name itself otherwise). A project's may not lead
    out of it unless ``trusted``; its ``allowed-tools`` apply only if it is the user's own.
    Blocking: call it in a worker thread.

    Raises:
        FrontMatterError, OSError, UnicodeDecodeError: its SKILL.md cannot be used.
    """
    for folder in reversed(skill_dirs(root)):
        path = folder.path / name / "SKILL.md"
        if os.path.isfile(path):
            command = _skill(path, folder.own, root, trusted)
            if command is not None and command.name == name:
                return command
    found = find_skills(root, trusted).get(name) if named else None
    return _skill(found.path, found.own, root, trusted) if found is not None else None


def skill_commands(root: Path, trusted: bool) -> list[CustomCommand]:
    """The skills users may type, as commands, from their heads (their bodies are not
    kept: :func:`find_skill` reads one when it is invoked). Blocking."""
    found: list[CustomCommand] = []
    for name, skill in sorted(find_skills(root, trusted).items()):
        within = None if skill.own or trusted else root
        try:
            head = read_head(skill.path, SKILL_HEAD, within=within)
            command = _parse(None, head, skill.path, "user" if skill.own else "project", skill.own, "skill")
        except (FrontMatterError, OSError, UnicodeDecodeError):
            continue
        if command is not None:
            found.append(replace(command, name=name, short=name, body=""))
    return found


def _skill(path: Path, own: bool, root: Path, trusted: bool) -> CustomCommand | None:
    data = read_skill(path, None if own or trusted else root).encode()
    return _parse(None, data, path, "user" if own else "project", own, "skill")


def parse_invocation(text: str) -> tuple[str, str] | None:
    """``/name args`` as (name, args); None when ``text`` names no command (it does not
    start with ``/``, starts with ``//``, or is a path such as ``/etc/hosts``)."""
    match = _INVOCATION.fullmatch(text.strip())
    if match is None:
        return None
    return match.group(1), (match.group(2) or "").strip()


def _parse(
    names: tuple[str, str] | None, data: bytes, path: Path, scope: str, granted: bool, kind: str
) -> CustomCommand | None:
    """The command a file holds (None: a skill not for users to type)."""
    text = data.decode("utf-8-sig")
    meta: dict[str, Any] = {}
    body = text.strip()
    if text.startswith("---"):
        meta, body = split_front_matter(text, str(path), _TEXT_FIELDS)
    if kind == "skill":
        if meta.get("user-invocable") is False:
            return None
        name = str(meta.get("name") or path.parent.name)
        names = (name, name)
        # Where its files are, as Claude Code tells a skill.
        body = body.replace("${CLAUDE_SKILL_DIR}", str(path.parent))
    assert names is not None
    first = next((line.strip() for line in body.splitlines() if line.strip()), "")
    model = meta.get("model")
    return CustomCommand(
        name=names[0],
        body=body,
        description=str(meta.get("description") or first[:100]),
        argument_hint=str(meta.get("argument-hint") or ""),
        model=model if isinstance(model, str) and model not in ("", "inherit") else None,
        allowed_tools=tool_list(meta.get("allowed-tools")),
        source=str(path),
        scope=scope,
        short=names[1],
        arguments=name_list(meta.get("arguments")),
        granted=granted,
        kind=kind,
    )
