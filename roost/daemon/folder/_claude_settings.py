"""Claude Code's settings files, for their hooks, permission rules, ``env`` and ``model``.

    {"hooks": {
      "PreToolUse": [{"matcher": "Bash|Edit",
                      "hooks": [{"type": "command", "command": "...", "timeout": 60}]}],
      "PostToolUse": [...], "UserPromptSubmit": [...], "Stop": [...]}}

Read from the user's ``~/.claude/settings.json`` (``$CLAUDE_CONFIG_DIR`` moves it) and the
project's ``.claude/settings.json`` and ``.claude/settings.local.json`` (at its root). Only
``hooks``, ``permissions``, ``env`` and ``model`` are read: of ``hooks`` the events roost
runs (PreToolUse, PostToolUse, UserPromptSubmit, Stop, SessionStart, SubagentStop,
Notification, PreCompact) and hooks of ``type: command``; of ``permissions`` the
``allow``, ``deny`` and ``ask`` rules, in Claude Code's syntax (see
:func:`roost.loop.parse_rule`: a rule roost cannot use is an error naming it, never a rule
that silently never matches), ``additionalDirectories`` (read rules on those folders) and
``defaultMode`` (``plan``, ``default`` and ``bypassPermissions`` are roost's plan, agent and
full; ``acceptEdits`` is agent mode with writes and edits in the folder allowed); the rest
is left alone.
``env`` (``{"NAME": "value"}``) sets variables as Claude Code sets them in its own
environment, over the dispatching terminal's: for the model's provider (``ANTHROPIC_MODEL``,
``ANTHROPIC_BASE_URL``, ...) and for what the run starts (commands, hooks; MCP servers get
their ``${VAR}`` and ``PATH`` from it), still without secrets for tool processes (see
``runs/_environ``); the project's over the user's, ``settings.local.json`` last. ``model``
is the model when nothing else names one (under ``ANTHROPIC_MODEL``, over roost's
``default_model``: see ``_models``), the project's over the user's.
A matcher is Claude Code's (see ``_claude.tool_matcher``; SessionStart's matches its
``source``, SubagentStop's the agent's name; the prompt and stop events have none); ``timeout`` is in seconds, 60 unless said.
An entry's ``if`` is a permission rule in Claude Code's syntax (``Bash(git *)``,
``Edit(*.ts)``): on a tool event the hook runs only for the calls it matches (those a deny
rule of it would refuse: a bash line if any command it runs matches); on another event a
hook with an ``if`` never runs, as in Claude Code. ``async: true`` runs it off the run's
way (see ``runs._hooks``).

The user's hooks, rules, ``env`` and ``model`` are the user speaking. A project's deny and
ask rules narrow, and always apply; its allow rules, folders, a default mode other than
``plan``, each variable of its ``env`` (``PATH``, ``LD_PRELOAD``, ``GIT_SSH_COMMAND`` or a
provider's URL change what runs and where keys go) and its ``model`` (a model costs money,
and the user's ``[models]`` may route it to another provider) widen, and apply only while
the file is trusted. A
project's hooks are widening (see ``_trust``): each
is reported as a :class:`Widening` (kind ``hook``, as ``[[hooks.*]]`` of a project's
config.toml are) and runs only while its file is trusted with its content as it is now,
and so is each project file its command runs (``.claude/hooks/check.sh``: see ``_scripts``).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from roost.loop import Rule, RuleError, escape, parse_rule

from ._claude import tool_matcher
from ._config import ConfigError, Hook, parse_rules, read_config
from ._models import is_test_model
from ._project import claude_user_dir
from ._reading import FolderFiles
from ._review import command_warnings, env_warnings, mode_warnings, rule_warnings, shell_variables
from ._scripts import shell_words
from ._trust import NO_TRUST, Trust, Widening, digest

#: The Claude Code events roost runs hooks for, and roost's kind of each.
EVENTS: Mapping[str, str] = {
    "PreToolUse": "pre_tool",
    "PostToolUse": "post_tool",
    "UserPromptSubmit": "prompt",
    "Stop": "stop",
    "SessionStart": "session_start",
    "SubagentStop": "subagent_stop",
    "Notification": "notification",
    "PreCompact": "pre_compact",
    "SessionEnd": "session_end",
}
#: The kinds whose matcher matches a word of the event (how the session started, the
#: sub-agent's type, the notification's type, what started a compaction, why the session
#: ended), not a tool.
WORD_MATCHED = frozenset({"session_start", "subagent_stop", "notification", "pre_compact", "session_end"})
#: Claude Code's tools roost has none of: a settings file's rules about them are left out
#: (nothing roost runs is one of them); on a dispatch or in roost's config they are errors.
CLAUDE_ONLY_TOOLS = frozenset({"ExitPlanMode", "SlashCommand", "ListMcpResourcesTool", "ReadMcpResourceTool"})
#: Seconds a Claude Code hook may run unless its entry says.
DEFAULT_TIMEOUT = 60.0


@dataclass(frozen=True, slots=True)
class ClaudeSettings:
    """The hooks of a folder's Claude Code settings, as one trust snapshot allows them."""

    #: The hooks that run: the user's, then the trusted project files'.
    hooks: tuple[Hook, ...] = ()
    #: Every hook and allow rule of the project's files, trusted (applied) or not.
    widening: tuple[Widening, ...] = ()
    #: The permission rules that apply: the user's, the project's deny and ask rules, and
    #: the trusted project files' allow rules (``additionalDirectories`` as read rules, a
    #: ``defaultMode`` of ``acceptEdits`` as write and edit rules on the folder).
    rules: tuple[Rule, ...] = ()
    #: The run mode ``permissions.defaultMode`` makes the default (None: it says none):
    #: the project's, where it narrows or the file is trusted, else the user's.
    default_mode: str | None = None
    #: The variables of ``env`` that apply: the user's, then the trusted project files'.
    env: Mapping[str, str] = field(default_factory=dict)
    #: The ``model`` that applies (None: no file names one): a trusted project file's, else
    #: the user's.
    model: str | None = None


def load_claude_settings(cwd: str, environ: Mapping[str, str], trust: Trust = NO_TRUST) -> ClaudeSettings:
    """The hooks and rules for a session in ``cwd``: Claude Code's settings alone (a
    folder's whole setup reads them with the rest: see :func:`claude_settings_from`).
    Reads files: call it in a worker thread.

    Raises:
        ConfigError: a settings file cannot be read, is not JSON, or has hooks of the wrong
            shape (trusted or not: a broken file is reported, never half-read).
    """
    return claude_settings_from(FolderFiles(cwd, environ, trust))


def claude_settings_from(files: FolderFiles) -> ClaudeSettings:
    """The hooks and rules of Claude Code's settings for the folder ``files`` reads.

    Raises:
        ConfigError: as :func:`load_claude_settings`.
    """
    user = claude_user_dir(files.environ) / "settings.json"
    hooks: list[Hook] = []
    rules: list[Rule] = []
    mode: str | None = None
    env: dict[str, str] = {}
    model: str | None = None
    if os.path.lexists(user):
        mine = _settings(user, read_config(files, user, own=True))
        env.update(_env(user, mine))
        model = _model(user, mine)
        hooks += settings_hooks(user, mine)
        for action in ("allow", "deny", "ask"):
            rules += _rules(user, mine, action)
        rules += _folders(user, mine)
        mode, edits = _default_mode(user, mine)
        rules += edits
    widening: list[Widening] = []
    place = files.place
    root = os.fspath(place.root)
    for name in ("settings.json", "settings.local.json"):
        path = place.root / ".claude" / name
        # A project at the home folder: its .claude is the user's own (read above).
        if not os.path.lexists(path) or _same(path, user):
            continue
        data = read_config(files, path)
        trusted = files.covers(path)
        settings = _settings(path, data)
        rules += _rules(path, settings, "deny") + _rules(path, settings, "ask")
        theirs, edits = _default_mode(path, settings)
        for rule in [*_rules(path, settings, "allow"), *_folders(path, settings), *edits]:
            widening.append(Widening("allow rule", str(rule), "", str(path), digest(data), trusted, warnings=rule_warnings(str(rule))))
            if trusted:
                rules.append(rule)
        if theirs is not None:
            if theirs == "plan" or trusted:
                mode = theirs
            if theirs != "plan":
                # Listed trusted too: what roost trust showed stays shown.
                item = Widening("default mode", theirs, "defaultMode", str(path), digest(data), trusted, warnings=mode_warnings(theirs))
                widening.append(item)
        for name, value in _env(path, settings).items():
            widening.append(
                Widening("environment variable", name, value, str(path), digest(data), trusted, warnings=env_warnings(name, value))
            )
            if trusted:
                env[name] = value
        named = _model(path, settings)
        if named is not None:
            if is_test_model(named):
                raise ConfigError(f"{path}: model: a project's file cannot name {named}: only your own may")
            widening.append(Widening("default model", named, "model", str(path), digest(data), trusted))
            if trusted:
                model = named
        for hook in settings_hooks(path, settings):
            # A hook runs in the session's folder, and is written for the project's root.
            runs = files.scripts(shell_words(hook.command), (place.cwd, root))
            item = Widening(
                "hook",
                f"{hook.event} {hook.match or '*'}",
                hook.command,
                str(path),
                digest(data),
                trusted and all(script.trusted for script in runs),
                runs,
                variables=shell_variables(hook.command),
                warnings=command_warnings(hook.command),
            )
            widening.append(item)
            if item.trusted:
                hooks.append(hook)
    return ClaudeSettings(tuple(hooks), tuple(widening), tuple(rules), mode, env, model)


def _settings(path: Path, data: bytes) -> Mapping[str, Any]:
    try:
        settings = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: not JSON: {exc}") from None
    if not isinstance(settings, dict):
        raise ConfigError(f"{path}: settings must be a JSON object")
    return settings


def _env(path: Path, settings: Mapping[str, Any]) -> dict[str, str]:
    """A file's ``env``: names to values (a number or true/false as Claude Code's JSON
    writes them, as text)."""
    env = settings.get("env", {})
    if not isinstance(env, dict):
        raise ConfigError(f"{path}: env must be an object of variables")
    out = {}
    for name, value in env.items():
        if not _NAME.fullmatch(name):
            raise ConfigError(f"{path}: env: {name!r} is not a variable's name")
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (int, float)):
            value = str(value)
        if not isinstance(value, str) or "\0" in value:
            raise ConfigError(f"{path}: env.{name} must be text")
        out[name] = value
    return out


#: A variable's name as a shell writes it.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _model(path: Path, settings: Mapping[str, Any]) -> str | None:
    """A file's ``model`` (None: it names none)."""
    model = settings.get("model")
    if model is None:
        return None
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"{path}: model must be a model's name")
    return model.strip()


def _rules(path: Path, settings: Mapping[str, Any], action: str) -> list[Rule]:
    """One action's rules of a settings file's ``permissions``."""
    permissions = settings.get("permissions", {})
    if not isinstance(permissions, dict):
        raise ConfigError(f"{path}: permissions must be an object")
    texts = permissions.get(action, [])
    if isinstance(texts, list):
        # Written for Claude Code, a file may name its tools roost has not: no roost call is one.
        texts = [t for t in texts if not (isinstance(t, str) and t.split("(", 1)[0].strip() in CLAUDE_ONLY_TOOLS)]
    return parse_rules(texts, action, str(path))


#: Claude Code's ``defaultMode`` values as roost's modes (``acceptEdits``: agent mode with
#: edits in the folder allowed; ``dontAsk`` has no roost mode).
_MODES = {"default": "agent", "acceptEdits": "agent", "plan": "plan", "bypassPermissions": "full"}


def _default_mode(path: Path, settings: Mapping[str, Any]) -> tuple[str | None, list[Rule]]:
    """A file's ``permissions.defaultMode`` as a roost mode, and the rules it brings."""
    permissions = settings.get("permissions", {})
    value = permissions.get("defaultMode") if isinstance(permissions, dict) else None
    if value is None:
        return None, []
    if value not in _MODES:
        raise ConfigError(f"{path}: permissions.defaultMode {value!r} is not one roost has ({', '.join(_MODES)})")
    edits = parse_rules(["write|edit(**)"], "allow", str(path)) if value == "acceptEdits" else []
    return _MODES[value], edits


def _folders(path: Path, settings: Mapping[str, Any]) -> list[Rule]:
    """``permissions.additionalDirectories`` as rules that let the file tools read there."""
    permissions = settings.get("permissions", {})
    folders = permissions.get("additionalDirectories", []) if isinstance(permissions, dict) else []
    if not isinstance(folders, list) or not all(isinstance(f, str) and f for f in folders):
        raise ConfigError(f"{path}: permissions.additionalDirectories must be a list of folders")
    base = path.parent.parent  # relative to the project (or the user's home for ~/.claude)
    return parse_rules([f"read({escape(os.path.join(base, os.path.expanduser(f)).rstrip('/'))}/**)" for f in folders], "allow", str(path))


def settings_hooks(path: Path, settings: Mapping[str, Any]) -> list[Hook]:
    """The hooks roost runs of one settings file (or a plugin's ``hooks.json``, which has
    the same ``hooks`` object), in the file's order.

    Raises:
        ConfigError: ``hooks`` is not of Claude Code's shape.
    """
    events = settings.get("hooks", {})
    if not isinstance(events, dict):
        raise ConfigError(f"{path}: hooks must be an object of events")
    hooks = []
    for event, groups in events.items():
        if not isinstance(groups, list) or not all(isinstance(g, dict) for g in groups):
            raise ConfigError(f"{path}: hooks.{event} must be a list of {{matcher, hooks}} objects")
        if event not in EVENTS:
            continue  # an event roost does not have (PostToolUseFailure, PermissionRequest, ...)
        for i, group in enumerate(groups):
            hooks += _group(event, group, f"{path}: hooks.{event}[{i}]", str(path))
    return hooks


def _group(event: str, group: Mapping[str, Any], where: str, source: str) -> list[Hook]:
    kind = EVENTS[event]
    # UserPromptSubmit and Stop have no matcher: every hook of theirs runs.
    matcher = group.get("matcher", "") if kind in ("pre_tool", "post_tool", *WORD_MATCHED) else ""
    if not isinstance(matcher, str):
        raise ConfigError(f"{where}: matcher must be a string")
    try:
        tool_matcher(matcher)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    entries: Any = group.get("hooks", [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ConfigError(f"{where}: hooks must be a list of {{type, command}} objects")
    hooks = []
    for j, entry in enumerate(entries):
        if entry.get("type", "command") != "command":
            continue  # prompt and other hook types are Claude Code's own
        command, timeout = entry.get("command"), entry.get("timeout", DEFAULT_TIMEOUT)
        if not isinstance(command, str) or not command.strip():
            raise ConfigError(f"{where}.hooks[{j}]: command must be a shell command")
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
            raise ConfigError(f"{where}.hooks[{j}]: timeout must be a number of seconds > 0")
        background = entry.get("async", False)
        if not isinstance(background, bool):
            raise ConfigError(f"{where}.hooks[{j}]: async must be true or false")
        condition = _condition(entry.get("if"), kind, f"{where}.hooks[{j}]", source)
        if condition is False:
            continue  # an `if` on an event without a tool call: Claude Code never runs it
        rule = condition if isinstance(condition, Rule) else None
        hooks.append(Hook(kind, matcher, command, float(timeout), source, event, condition=rule, background=background))
    return hooks


def _condition(text: Any, kind: str, where: str, source: str) -> Rule | None | bool:
    """A hook entry's ``if``: the rule a call must match (None: no ``if``; False: an ``if``
    on an event that has no tool call, where the hook never runs)."""
    if text is None:
        return None
    if not isinstance(text, str):
        raise ConfigError(f"{where}: if must be a permission rule such as Bash(git *)")
    if kind not in ("pre_tool", "post_tool"):
        return False
    try:
        return parse_rule(text, "deny", source)
    except RuleError as exc:
        raise ConfigError(f"{where}: if: {exc}") from None


def _same(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)
