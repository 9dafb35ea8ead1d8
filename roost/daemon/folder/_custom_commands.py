"""Custom slash commands: Claude Code's ``.claude/commands/*.md``, typed as ``/name args``.

    ---
    description: Review a file
    argument-hint: FILE [FOCUS]
    model: haiku
    ---
    Review $1, paying attention to $2. Everything asked: $ARGUMENTS

Files come from the user's ``~/.claude/commands`` (``$CLAUDE_CONFIG_DIR`` moves it) and the
project's ``.claude/commands`` (at its root); a project's command overrides the user's of
the same name, as its agents and skills do. A file in a subfolder is named by its path:
``frontend/component.md`` is ``/frontend:component``, and ``/component`` too while no other
command ends so. An enabled Claude Code plugin's commands are ``/plugin:command`` (scope
``plugin``; see ``_plugins``). Front matter is optional: ``description`` (else the body's
first line), ``argument-hint``, ``model`` (Claude Code's names understood: ``haiku``), ``allowed-tools``
(listed, not applied: in Claude Code it approves calls without asking, which only the
user's own rules and flags do here).

Expanding a command (:meth:`CustomCommand.expand`): ``$ARGUMENTS`` becomes everything after
the name, ``$1``, ``$2``, ... its words (shell quoting groups words); a body with neither
gets the arguments appended as ``ARGUMENTS: ...``. Claude Code's ``!`command``` lines
and ``@file`` references are left as they are: expanding them would run commands and read
files on a file's say.

A command is text for the model, never run by roost, so nothing in it widens what roost
does: a project's commands need no trust (like its instructions), but in a folder not
trusted a command file that leads out of the project is not read.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ._plugins import plugins_from
from ._project import FrontMatterError, claude_user_dir, split_front_matter
from ._reading import FolderFiles
from ._trust import NO_TRUST, Trust

#: Bytes a command file may have, and command files read per folder.
COMMAND_LIMIT = 256 * 1024
MAX_COMMANDS = 1000

#: ``/name rest``: a name of letters, digits, ``_ - . :``, then nothing or white space
#: (``/etc/hosts is broken`` is a task, not a command).
_INVOCATION = re.compile(r"/(\w[\w.:-]*)(?:\s+(.*))?", re.S)
_PART = re.compile(r"\w[\w.-]*")
_POSITIONAL = re.compile(r"\$([1-9][0-9]*)")


@dataclass(frozen=True, slots=True)
class CustomCommand:
    """One command file."""

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

    @property
    def short(self) -> str:
        """The name without its folders (``component`` of ``frontend:component``)."""
        return self.name.rsplit(":", 1)[-1]

    def expand(self, arguments: str) -> str:
        """The body with ``arguments`` in place of ``$ARGUMENTS`` and ``$1``, ``$2``, ..."""
        arguments = arguments.strip()
        try:
            words = shlex.split(arguments)
        except ValueError:
            words = arguments.split()  # an unclosed quote: plain words
        if "$ARGUMENTS" not in self.body and not _POSITIONAL.search(self.body):
            return f"{self.body}\n\nARGUMENTS: {arguments}" if arguments else self.body

        def word(match: re.Match[str]) -> str:
            n = int(match.group(1))
            return words[n - 1] if n <= len(words) else ""

        return _POSITIONAL.sub(word, self.body.replace("$ARGUMENTS", arguments))

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
        }


class UnknownCommand(LookupError):
    """No command, or more than one, goes by a name; the message lists those there are."""


@dataclass(frozen=True, slots=True)
class CommandSet:
    """The custom commands for a folder, by full name, and the files that could not be used."""

    commands: Mapping[str, CustomCommand]
    #: A message for each file skipped (its path, and why).
    problems: tuple[str, ...] = ()

    def find(self, name: str) -> CustomCommand:
        """The command ``/name`` means: the one of that full name, else the only one whose
        short name it is.

        Raises:
            UnknownCommand: none, or several.
        """
        if name in self.commands:
            return self.commands[name]
        matches = [c for c in self.commands.values() if c.short == name]
        if len(matches) == 1:
            return matches[0]
        if matches:
            names = ", ".join("/" + c.name for c in matches)
            raise UnknownCommand(f"/{name} could be any of {names}: type the full name")
        known = ", ".join(sorted("/" + self.typed(c) for c in self.commands.values())) or "none"
        skipped = f"; files skipped: {'; '.join(self.problems)}" if self.problems else ""
        raise UnknownCommand(
            f"no custom command /{name} (commands here: {known}{skipped}); a task that starts "
            "with // is sent with one / as it is"
        )

    def typed(self, command: CustomCommand) -> str:
        """The shortest name that finds ``command``."""
        if command.short == command.name:
            return command.name
        alone = sum(1 for c in self.commands.values() if c.short == command.short) == 1
        return command.short if alone and command.short not in self.commands else command.name

    def describe(self) -> list[dict[str, Any]]:
        """Every command as ``commands.list`` shows it, by name."""
        return [c.describe(self.typed(c) == c.short) for _, c in sorted(self.commands.items())]


def parse_invocation(text: str) -> tuple[str, str] | None:
    """``/name args`` as (name, args); None when ``text`` names no command (it does not
    start with ``/``, starts with ``//``, or is a path such as ``/etc/hosts``)."""
    match = _INVOCATION.fullmatch(text.strip())
    if match is None:
        return None
    return match.group(1), (match.group(2) or "").strip()


def load_commands(cwd: str, environ: Mapping[str, str], trust: Trust = NO_TRUST) -> CommandSet:
    """The commands for a session in ``cwd``: the commands alone (a folder's whole setup
    reads them with the rest: see :func:`commands_from`). Reads files: call it in a worker
    thread."""
    return commands_from(FolderFiles(cwd, environ, trust))


def commands_from(files: FolderFiles) -> CommandSet:
    """The commands for a session in the folder ``files`` reads (a trusted project's
    command files may lead out of it)."""
    commands: dict[str, CustomCommand] = {}
    problems: list[str] = []
    user = claude_user_dir(files.environ) / "commands"
    project = files.place.root / ".claude" / "commands"
    # The enabled plugins' commands first, named /plugin:command, ${CLAUDE_PLUGIN_ROOT}
    # their folder (see _plugins).
    plugins = plugins_from(files).active
    folders = [(place, "plugin", f"{p.name}:", p.root) for p in plugins for place in p.commands]
    folders.append((user, "user", "", ""))
    # A project at the home folder: its .claude is the user's own.
    if os.path.realpath(project) != os.path.realpath(user):
        folders.append((project, "project", "", ""))
    for folder, scope, prefix, root in folders:
        single = folder.is_file()  # a plugin's command file named in its plugin.json
        for path in [folder] if single else _files(folder, problems):
            name = prefix + ":".join(path.relative_to(folder.parent if single else folder).with_suffix("").parts)
            if not all(_PART.fullmatch(part) for part in name.split(":")):
                problems.append(f"{path}: a command's name is letters, digits, _ - and . (folders: a :)")
                continue
            try:
                data = files.read(path, COMMAND_LIMIT, own=scope != "project")
                data = data.replace(b"${CLAUDE_PLUGIN_ROOT}", root.encode()) if root else data
                commands[name] = _parse(name, data, str(path), scope)
            except FrontMatterError as exc:
                problems.append(str(exc))
            except (OSError, UnicodeDecodeError) as exc:
                problems.append(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}")
    return CommandSet(commands, tuple(problems))


def _files(folder: Path, problems: list[str]) -> list[Path]:
    """The ``.md`` files under ``folder`` (links to folders not followed), at most
    MAX_COMMANDS of them."""
    found: list[Path] = []
    for top, dirs, files in os.walk(folder):
        dirs.sort()
        found += [Path(top) / f for f in sorted(files) if f.endswith(".md")]
        if len(found) > MAX_COMMANDS:
            problems.append(f"{folder}: more than {MAX_COMMANDS} command files; the rest are not read")
            return found[:MAX_COMMANDS]
    return found


def _parse(name: str, data: bytes, source: str, scope: str) -> CustomCommand:
    text = data.decode("utf-8-sig")
    meta: dict[str, Any] = {}
    body = text.strip()
    if text.startswith("---"):
        meta, body = split_front_matter(text, source)
    first = next((line.strip() for line in body.splitlines() if line.strip()), "")
    model = meta.get("model")
    tools = meta.get("allowed-tools") or ()
    if isinstance(tools, str):
        tools = [t.strip() for t in tools.split(",") if t.strip()]
    return CustomCommand(
        name=name,
        body=body,
        description=str(meta.get("description") or first[:100]),
        argument_hint=str(meta.get("argument-hint") or ""),
        model=model if isinstance(model, str) and model != "inherit" else None,
        allowed_tools=tuple(str(t) for t in tools) if isinstance(tools, (list, tuple)) else (),
        source=source,
        scope=scope,
    )
