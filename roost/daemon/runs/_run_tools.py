"""The tools a run is offered, as far as the folder's MCP servers go: which servers an
agent's tool list reaches (started as needed), which tools only read, and what the tools'
descriptions take of every call."""

from __future__ import annotations

import fnmatch
import json
import logging
from typing import Any, Iterable, Mapping

from roost.loop import RunSettings

from ..folder._agents import Agent
from ..folder._setup import FolderSetup
from ..mcp import McpManager, McpServerConfig
from ..providers import ToolSpec
from ..tools import ToolRegistry

__all__ = ["mcp_selected", "mcp_tools", "read_only", "servers_of", "tools_size"]

log = logging.getLogger(__name__)


async def mcp_tools(
    mcp: McpManager | None, agent: Agent, setup: FolderSetup
) -> tuple[tuple[str, ...], dict[str, McpServerConfig]]:
    """Names of the MCP tools a run of ``agent`` in the folder may get, and the servers (of
    the folder's config) they are on, starting those that are not running yet (bounded: a
    server that fails to start is reported by ``mcp.list`` and blocks nothing)."""
    if mcp is None:
        return (), {}
    servers = dict(setup.mcp)
    for problem in setup.mcp_config.problems:
        log.warning("MCP config: %s", problem)
    if agent.tools is not None:
        servers = servers_of(servers, agent.tools)
    if not servers:
        return (), {}
    await mcp.ensure(servers)
    return tuple(t.name for t in mcp.tools(servers)), servers


def read_only(
    registry: ToolRegistry, mcp: McpManager | None, tools: tuple[str, ...], servers: Mapping[str, McpServerConfig]
) -> tuple[str, ...]:
    """The tools among ``tools`` whose calls only read: built-ins that say so, and MCP tools
    their server marks ``readOnlyHint``."""
    marked = {t.name for t in mcp.tools(servers) if t.read_only} if mcp is not None else set()
    return tuple(n for n in tools if n in marked or ((tool := registry.get(n)) is not None and tool.read_only))


def tools_size(
    registry: ToolRegistry,
    mcp: McpManager | None,
    settings: RunSettings,
    specs: Mapping[str, ToolSpec],
    servers: Mapping[str, McpServerConfig],
) -> dict[str, object]:
    """What the tools the model is offered take of every call (descriptions and input
    schemas, in characters), recorded with the prompt's layers."""
    offered = {t.name: t for t in mcp.tools(servers, settings.tools)} if mcp is not None else {}
    chars = 0
    for name in settings.tools:
        found = registry.get(name) or specs.get(name) or offered.get(name)
        if found is not None:
            chars += len(found.description) + _schema_chars(found.input_schema)
    return {"name": "tools", "chars": chars, "source": "tool descriptions and input schemas"}


#: The size of each input schema seen, by identity (the schema kept, so that its id is never
#: another's): the same few schemas, written out at every dispatch, were 3% of its CPU.
_SCHEMA_CHARS: dict[int, tuple[Mapping[str, Any], int]] = {}


def _schema_chars(schema: Mapping[str, Any]) -> int:
    known = _SCHEMA_CHARS.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    if len(_SCHEMA_CHARS) >= 1024:
        _SCHEMA_CHARS.clear()
    size = len(json.dumps(schema))
    _SCHEMA_CHARS[id(schema)] = (schema, size)
    return size


def servers_of(servers: Mapping[str, McpServerConfig], tools: Iterable[str]) -> dict[str, McpServerConfig]:
    """The servers that ``tools`` (``server__tool`` names or ``server__*`` globs) are on."""
    wanted = {t.split("__", 1)[0] for t in tools if "__" in t}
    return {name: config for name, config in servers.items() if name in wanted}


def mcp_selected(name: str, allowed: tuple[str, ...]) -> bool:
    """Whether an agent's tool list (``time__*``, ``everything__echo``) covers an MCP tool."""
    return "__" in name and any(fnmatch.fnmatchcase(name, pattern) for pattern in allowed)
