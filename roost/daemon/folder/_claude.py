"""Claude Code's names for what roost has: tools, their input fields, modes (its model
names are read where every model name is: ``_models``).

A hook script or a command written for Claude Code names things as Claude Code does
(``Bash``, ``tool_input.file_path``, ``mcp__server__tool``). This module
translates, both ways, so that such files work unchanged; it holds the tables and nothing
else (pure functions, no IO).
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any, Callable, Mapping

from roost.loop import CLAUDE_TOOL_NAMES as TOOL_NAMES
from roost.loop import PatternError, linear_regex

#: roost's tools by each of Claude Code's names for them (``MultiEdit`` -> ``edit``).
_ROOST_NAMES: Mapping[str, str] = {claude: tool for tool, names in TOOL_NAMES.items() for claude in names}

#: Input fields Claude Code names differently, by roost tool: roost's name -> Claude Code's.
_FIELDS: Mapping[str, Mapping[str, str]] = {
    "read": {"path": "file_path"},
    "write": {"path": "file_path"},
    "edit": {"path": "file_path", "old": "old_string", "new": "new_string"},
    "grep": {"ignore_case": "-i", "context": "-C", "max_results": "head_limit"},
    "notebook_read": {"path": "notebook_path"},
    "notebook_edit": {"path": "notebook_path"},
    "bash_output": {"id": "bash_id"},
    "kill_shell": {"id": "shell_id"},
}

#: roost's run modes as Claude Code's ``permission_mode``.
_MODES: Mapping[str, str] = {"plan": "plan", "agent": "default", "full": "bypassPermissions", "exec": "bypassPermissions"}

#: A matcher of only these characters names tools exactly (``Bash``, ``Edit|Write``);
#: any other character makes it a regular expression (``mcp__memory__.*``, ``^Notebook``).
_EXACT = re.compile(r"[\w\s,|-]*")


def tool_name(tool: str) -> str:
    """What Claude Code calls roost's tool ``tool`` (``bash`` -> ``Bash``; an MCP tool
    ``server__tool`` -> ``mcp__server__tool``; others as they are)."""
    return tool_names(tool)[0]


def tool_names(tool: str) -> tuple[str, ...]:
    """Every name Claude Code has for roost's tool ``tool`` (a matcher may name any)."""
    if tool in TOOL_NAMES:
        return TOOL_NAMES[tool]
    return ("mcp__" + tool,) if "__" in tool else (tool,)


def tool_matcher(pattern: str) -> Callable[[str], bool]:
    """A hook matcher as Claude Code reads it, as a test of roost's tool names.

    ``""`` and ``"*"`` match every tool; letters, digits, ``_``, ``-`` with ``|`` or ``,``
    between them name tools exactly; anything else is a regular expression searched in the
    name.

    Raises:
        ValueError: ``pattern`` is not a regular expression.
    """
    return _matcher(pattern.strip())


@functools.lru_cache(maxsize=256)
def _matcher(pattern: str) -> Callable[[str], bool]:
    if pattern in ("", "*"):
        return lambda tool: True
    if _EXACT.fullmatch(pattern):
        names = {name.strip() for name in re.split(r"[|,]", pattern) if name.strip()}
        return lambda tool: any(name in names for name in tool_names(tool))
    try:
        regex = linear_regex(pattern)  # a project's settings file: linear, whatever it says
    except PatternError as exc:
        raise ValueError(f"the matcher {pattern!r} cannot be used: {exc}") from None
    return lambda tool: any(regex.search(name) for name in tool_names(tool))


def event_matcher(pattern: str) -> Callable[[str], bool]:
    """A hook matcher of an event that matches a word rather than a tool (SessionStart's
    ``source``, SubagentStop's agent type): as :func:`tool_matcher` reads it, of the word
    as it is.

    Raises:
        ValueError: ``pattern`` is not a regular expression.
    """
    return _word_matcher(pattern.strip())


@functools.lru_cache(maxsize=256)
def _word_matcher(pattern: str) -> Callable[[str], bool]:
    if pattern in ("", "*"):
        return lambda word: True
    if _EXACT.fullmatch(pattern):
        names = {name.strip() for name in re.split(r"[|,]", pattern) if name.strip()}
        return lambda word: word in names
    try:
        regex = linear_regex(pattern)
    except PatternError as exc:
        raise ValueError(f"the matcher {pattern!r} cannot be used: {exc}") from None
    return lambda word: regex.search(word) is not None


def claude_input(tool: str, input: Mapping[str, Any], cwd: str) -> dict[str, Any]:
    """A call's input as Claude Code's tool would have it: fields renamed (``path`` ->
    ``file_path``), file paths absolute, bash's timeout in milliseconds."""
    fields = _FIELDS.get(tool, {})
    out = {fields.get(key, key): value for key, value in input.items()}
    for key in ("file_path", "notebook_path"):
        if isinstance(out.get(key), str):
            out[key] = os.path.normpath(os.path.join(cwd, os.path.expanduser(out[key])))
    if tool == "bash" and isinstance(out.get("timeout"), (int, float)):
        out["timeout"] = int(out["timeout"] * 1000)
    return out


def roost_input(tool: str, input: Mapping[str, Any]) -> dict[str, Any]:
    """The reverse of :func:`claude_input`: a Claude Code tool input (a hook's
    ``updatedInput``) as roost's tool takes it."""
    fields = {theirs: ours for ours, theirs in _FIELDS.get(tool, {}).items()}
    out = {fields.get(key, key): value for key, value in input.items()}
    if tool == "bash" and isinstance(out.get("timeout"), (int, float)):
        out["timeout"] = out["timeout"] / 1000
    return out


def tool_response(tool: str, input: Mapping[str, Any], text: str, is_error: bool, cwd: str) -> dict[str, Any]:
    """A result as a PostToolUse hook's ``tool_response``: roost has one text per result,
    so every tool gives ``output`` and ``success``, bash adds ``stdout``, file tools
    ``filePath`` (the keys of Claude Code's own responses that scripts use most)."""
    out: dict[str, Any] = {"output": text, "success": not is_error, "is_error": is_error}
    if tool == "bash":
        out.update(stdout=text, stderr="", interrupted=False)
    path = claude_input(tool, input, cwd).get("file_path")
    if isinstance(path, str):
        out["filePath"] = path
    return out


def roost_tool(name: str) -> str:
    """roost's name for the tool a Claude Code file names ``name`` (``Read`` -> ``read``);
    a name roost has no tool for, as it is."""
    return _ROOST_NAMES.get(name, name)


def permission_mode(mode: str) -> str:
    """A run mode as Claude Code's ``permission_mode``."""
    return _MODES.get(mode, "default")
