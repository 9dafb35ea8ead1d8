"""MCP prompts and resources as a task uses them: ``/mcp__server__prompt args`` and
``@server:uri``, in Claude Code's names.

A prompt is a slash command named ``mcp__SERVER__PROMPT`` (characters a command name cannot
hold become ``_``); the words after it (shell quoting groups words) go to the prompt's
declared arguments in order, the last one taking what is left. Its messages' text is the
task. A resource is read where the typed task names it (``@server:scheme://path``) and its
text sent after the task, bounded; binary contents are named, not sent (for now).

Pure functions on the SDK's values (read by attribute: no ``mcp`` import here).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any, Mapping

#: Before every prompt's command name, as in Claude Code.
PROMPT_PREFIX = "mcp__"
#: The characters of a resource's text (each) a task carries, and how many resources.
RESOURCE_LIMIT = 256 * 1024
MAX_RESOURCES = 20
_UNNAMEABLE = re.compile(r"[^\w.-]")
# @server:scheme://rest, the server named as config names them; what ends a sentence after
# the URI is not part of it.
_RESOURCE = re.compile(r"(?<![\w@])@([A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*):([A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"'`]+)")


class McpRequestError(Exception):
    """A prompt or resource could not be had from a server; the message says why."""


@dataclass(frozen=True, slots=True)
class McpPrompt:
    """One prompt of a ready server."""

    server: str
    #: The server's own name for it.
    prompt: str
    description: str
    #: Its declared arguments, in order: (name, required, description).
    arguments: tuple[tuple[str, bool, str], ...] = ()

    @property
    def command(self) -> str:
        """Its slash command's name: ``mcp__server__prompt``."""
        return f"{PROMPT_PREFIX}{self.server}__{_UNNAMEABLE.sub('_', self.prompt)}"

    @property
    def hint(self) -> str:
        """Its arguments as a usage line shows them: ``city [state]``."""
        return " ".join(name if required else f"[{name}]" for name, required, _ in self.arguments)

    def describe(self) -> dict[str, Any]:
        """The prompt as ``commands.list`` shows it (a command's keys)."""
        return {
            "name": self.command,
            "short": None,
            "description": self.description,
            "argument_hint": self.hint,
            "model": None,
            "allowed_tools": [],
            "source": f"MCP server {self.server}",
            "scope": "mcp",
            "kind": "mcp prompt",
        }


@dataclass(frozen=True, slots=True)
class McpResource:
    """One resource a ready server lists."""

    server: str
    uri: str
    name: str
    description: str = ""
    mime_type: str | None = None
    size: int | None = None

    def describe(self) -> dict[str, Any]:
        """The resource as ``mcp.resources`` shows it."""
        return {
            "server": self.server,
            "uri": self.uri,
            "reference": f"@{self.server}:{self.uri}",
            "name": self.name,
            "description": self.description,
            "mime_type": self.mime_type,
            "size": self.size,
        }


def mcp_prompt(server: str, prompt: Any) -> McpPrompt:
    """An SDK ``Prompt`` of ``server``."""
    arguments = tuple((a.name, bool(a.required), a.description or "") for a in prompt.arguments or ())
    return McpPrompt(server, prompt.name, prompt.description or prompt.title or "", arguments)


def mcp_resource(server: str, resource: Any) -> McpResource:
    """An SDK ``Resource`` of ``server``."""
    return McpResource(
        server, str(resource.uri), resource.name, resource.description or resource.title or "",
        resource.mime_type, resource.size,
    )


def split_prompt_command(name: str) -> tuple[str, str] | None:
    """``(server, prompt)`` of a ``mcp__server__prompt`` command name (the prompt as the
    command writes it), or None when it is not one."""
    if not name.startswith(PROMPT_PREFIX):
        return None
    server, sep, prompt = name[len(PROMPT_PREFIX):].partition("__")
    return (server, prompt) if sep and server and prompt else None


def prompt_arguments(prompt: McpPrompt, typed: str) -> dict[str, str]:
    """The words typed after a prompt's command, by its declared arguments in order (the
    last takes the rest of the words).

    Raises:
        ValueError: a required argument is missing (the message shows the usage).
    """
    try:
        words = shlex.split(typed)
    except ValueError:  # an open quote: the words as they are
        words = typed.split()
    names = [name for name, _, _ in prompt.arguments]
    given: dict[str, str] = {}
    for index, name in enumerate(names):
        if index >= len(words):
            break
        given[name] = " ".join(words[index:]) if index == len(names) - 1 else words[index]
    missing = [name for name, required, _ in prompt.arguments if required and name not in given]
    if missing:
        raise ValueError(f"/{prompt.command} needs {', '.join(missing)} (usage: /{prompt.command} {prompt.hint})")
    return given


def prompt_text(result: Any) -> str:
    """A ``GetPromptResult``'s messages as the task's text: text and embedded text
    resources as they are, other content named."""
    return "\n\n".join(_block_text(message.content) for message in result.messages).strip()


def resource_references(text: str, servers: Mapping[str, object]) -> list[tuple[str, str]]:
    """The ``@server:uri`` references of ``text`` to servers of ``servers``, each once, in
    order (at most :data:`MAX_RESOURCES`)."""
    found: list[tuple[str, str]] = []
    for match in _RESOURCE.finditer(text):
        reference = (match.group(1), match.group(2).rstrip(".,;:!?)"))
        if reference[0] in servers and reference not in found:
            found.append(reference)
    return found[:MAX_RESOURCES]


def resource_text(server: str, uri: str, result: Any) -> str:
    """A ``ReadResourceResult`` as the task carries it: each text content bounded to
    :data:`RESOURCE_LIMIT` characters; a binary one named."""
    parts = []
    for content in result.contents:
        mime = content.mime_type or ""
        text = getattr(content, "text", None)
        if text is None:
            size = len(getattr(content, "blob", "")) * 3 // 4
            parts.append(f"[binary content, {mime or 'no type'}, about {size} bytes: not included]")
        elif len(text) > RESOURCE_LIMIT:
            parts.append(text[:RESOURCE_LIMIT] + f"\n[cut at {RESOURCE_LIMIT} of {len(text)} characters]")
        else:
            parts.append(text)
    body = "\n".join(part.rstrip() for part in parts)
    return f'<mcp-resource server="{server}" uri="{_attribute(uri)}">\n{body}\n</mcp-resource>'


def unreadable(server: str, uri: str, why: str) -> str:
    """What the task carries for a resource that could not be read."""
    return f'<mcp-resource server="{server}" uri="{_attribute(uri)}">not included: {why}</mcp-resource>'


def _attribute(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind == "resource":
        inner = block.resource
        if getattr(inner, "text", None) is not None:
            return str(inner.text)
        return f"[resource: {inner.uri}, {inner.mime_type or 'binary'}: not included]"
    if kind == "resource_link":
        return f"[resource link: {block.uri} ({block.name})]"
    if kind in ("image", "audio"):
        return f"[{kind}: {block.mime_type}: not included]"
    return f"[{kind} content not shown]"
