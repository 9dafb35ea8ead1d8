"""What a folder's files say for a run, read once, under one trust snapshot.

A dispatch, a sub-agent, a compaction and restart recovery all need the same things from a
session's folder: the merged config, the agents, the MCP servers, the hooks of Claude Code's
settings files, and what the project's files would widen but may not (see ``_trust``). :func:`load_folder` reads them together in
one worker thread, so that every part of a run sees the same files and the same trust, and
the event loop never waits on a disk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from ._agents import AgentSet, load_agents
from ._claude_settings import ClaudeSettings, load_claude_settings
from ._config import Config, Hook, load_config
from ._environ import tool_environment
from ._project import one_root, project_root
from ._trust import Trust, Widening
from .mcp import McpServerConfig
from .mcp import McpServers, load_mcp_servers
from .sandbox import SandboxPaths, sandbox_paths


@dataclass(frozen=True, slots=True)
class FolderSetup:
    """A folder's config, agents, MCP servers and Claude Code hooks, as one trust snapshot
    allows them."""

    cwd: str
    #: The project's root (where ``roost trust`` records the folder).
    root: str
    config: Config
    agents: AgentSet
    mcp_config: McpServers
    #: What the config's ``[sandbox]`` tables name, and what the daemon always hides,
    #: resolved.
    sandbox_paths: SandboxPaths
    #: The user trusted the folder (its files may then link outside it).
    trusted: bool = False
    #: The hooks of Claude Code's settings files (the user's, and the project's).
    claude: ClaudeSettings = ClaudeSettings()

    @property
    def widening(self) -> tuple[Widening, ...]:
        """Everything the project's files say that widens, trusted or not."""
        return self.config.widening + self.agents.widening + self.mcp_config.widening + self.claude.widening

    @property
    def hooks(self) -> tuple[Hook, ...]:
        """The hooks runs here get: config.toml's, then Claude Code's settings files'."""
        return self.config.hooks + self.claude.hooks

    @property
    def ignored(self) -> tuple[Widening, ...]:
        """What the project's files would widen but may not: they are not trusted."""
        return tuple(item for item in self.widening if not item.trusted)

    def untrusted_notice(self) -> dict[str, Any] | None:
        """The ``project.untrusted`` event's data, when something was ignored (else None)."""
        ignored = self.ignored
        if not ignored:
            return None
        return {
            "folder": self.root,
            "ignored": [item.to_map() for item in ignored],
            "hint": f"roost trust {self.root}",
        }

    @property
    def mcp(self) -> Mapping[str, McpServerConfig]:
        """The MCP servers runs in this folder may use, by name."""
        return self.mcp_config.servers

    def tool_environment(self, environ: Mapping[str, str]) -> dict[str, str]:
        """``environ`` as tool processes, hooks and MCP servers get it (no secrets)."""
        keys = [p.api_key_env for p in self.config.providers.values() if p.api_key_env]
        return tool_environment(environ, keys=keys, passed=self.config.tool_env_pass)


def load_folder(cwd: str, environ: Mapping[str, str], trust: Trust, hidden: Iterable[str]) -> FolderSetup:
    """Read ``cwd``'s config, agents, MCP servers and Claude Code hooks, and resolve the
    sandbox paths (``hidden``: what the sandbox always hides) (in a worker thread).

    Raises:
        ConfigError: a config file cannot be used.
    """
    with one_root():
        root = project_root(cwd) or Path(cwd)
        config = load_config(cwd, environ, trust)
        agents = load_agents(cwd, trust)
        servers = load_mcp_servers(cwd, environ, trust)
        claude = load_claude_settings(cwd, environ, trust)
    paths = sandbox_paths(cwd, user=config.sandbox, project=config.project_sandbox, hidden=hidden)
    return FolderSetup(cwd, os.fspath(root), config, agents, servers, paths, trust.has_folder(root), claude)
