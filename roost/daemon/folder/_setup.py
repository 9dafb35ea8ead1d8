"""What a folder's files say for a run, read once, under one trust snapshot.

A dispatch, a sub-agent, a compaction and restart recovery all need the same things from a
session's folder: the merged config, the agents, the MCP servers, the hooks of Claude Code's
settings files, the custom commands, the user's Claude Code plugins, what the project's files would widen but may not (see
``_trust``), and the project files that must not change under a run
(:attr:`FolderSetup.protected`). :func:`load_folder` reads them as one pipeline, in one
worker thread: the project's root is found once, each file is read once (bounded, see
``_reading``), parsed, its trust judged once against the one snapshot, and the parts make
the setup. Every part of a run sees the same files and the same trust, and the event loop
never waits on a disk.

What the setup does not hold is read per run, from its :attr:`FolderSetup.place` (the root
not looked for again): the system prompt's files (see ``_prompt``), after the prompt's
hooks ran and through the daemon's prompt cache.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..mcp import McpServerConfig, McpServers, client_servers, mcp_servers_from, with_environment
from ..runs._environ import tool_environment
from ..sandbox import SandboxPaths, Walks, sandbox_paths
from ._agents import AgentSet, agents_from
from ._claude_rules import ClaudeRules, claude_rules_from
from ._claude_settings import ClaudeSettings, claude_settings_from
from ._config import Config, Hook, config_from
from ._custom_commands import CommandSet, commands_from
from ._plugins import PluginSet, plugins_from
from ._project import Place
from ._reading import FolderFiles
from ._scripts import Word, argv_words, named_files, project_files, shell_words
from ._trust import Trust, Widening


@dataclass(frozen=True, slots=True)
class FolderSetup:
    """A folder's config, agents, MCP servers, Claude Code hooks and custom commands, as one
    trust snapshot allows them."""

    cwd: str
    #: The project's root (where ``roost trust`` records the folder).
    root: str
    config: Config
    agents: AgentSet
    mcp_config: McpServers
    #: What the config's ``[sandbox]`` tables name, what the daemon always hides, and what
    #: is protected in the writable folders, resolved; None in a setup read to describe the
    #: folder, not to run in it (see :func:`with_sandbox_paths`).
    sandbox_paths: SandboxPaths | None
    #: The user trusted the folder (its files may then link outside it).
    trusted: bool = False
    #: What Claude Code's settings files say (hooks, rules, env, model): the user's, and the project's.
    claude: ClaudeSettings = ClaudeSettings()
    #: The project files a run must not change (see :func:`protected_files`).
    protected: tuple[str, ...] = ()
    #: The custom commands (``/name``) of the user and the project.
    commands: CommandSet = CommandSet({})
    #: The user's Claude Code plugins (see ``_plugins``): their agents, commands and MCP
    #: servers are in the parts above; their hooks and skills come from here.
    plugins: PluginSet = PluginSet()
    #: Claude Code's rules (``.claude/rules``) of the user and the project.
    rules: ClaudeRules = ClaudeRules()

    @property
    def place(self) -> Place:
        """Where runs in this folder work: what reads more of it (the system prompt's
        files) starts from here."""
        return Place(self.cwd, Path(self.root), self.trusted, self.plugins.skill_folders)

    @property
    def widening(self) -> tuple[Widening, ...]:
        """Everything the project's files say that widens, trusted or not."""
        return (
            self.config.widening + self.agents.widening + self.mcp_config.widening + self.claude.widening
            + self.plugins.widening + self.commands.widening
        )

    @property
    def trust_files(self) -> dict[str, str]:
        """What ``roost trust`` records for the folder as it is now: each widening file's
        digest, and what each project file an entry runs is (see ``_scripts``)."""
        files = {item.source: item.digest for item in self.widening}
        for item in self.widening:
            # One that cannot be bound is never recorded: its entry stays untrusted.
            files.update((script.path, script.digest) for script in item.runs if script.digest)
        return files

    @property
    def hooks(self) -> tuple[Hook, ...]:
        """The hooks runs here get: config.toml's, Claude Code's settings files', then the
        enabled plugins'."""
        return self.config.hooks + self.claude.hooks + self.plugins.hooks

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

    def environment(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The dispatching client's ``environ`` with what Claude Code's settings files set
        (their ``env``: the user's, and a trusted project's), as runs here see it."""
        return {**environ, **self.claude.env}

    def with_servers(self, entries: Mapping[str, Any], environ: Mapping[str, str]) -> FolderSetup:
        """This setup with the MCP servers a client brought for its run (in ``.mcp.json``'s
        shape; they take the place of the folder's of the same name), completed from the
        client's ``environ`` as the folder's are.

        Raises:
            ValueError: an entry that cannot be used (the message names it).
        """
        seen = self.environment(environ)
        brought = McpServers(servers=client_servers(entries, self.cwd, seen))
        brought = with_environment(brought, seen, self.tool_environment(environ))
        servers = {**self.mcp_config.servers, **brought.servers}
        return replace(self, mcp_config=replace(self.mcp_config, servers=servers))

    def tool_environment(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The client's ``environ`` as tool processes, hooks and MCP servers get it here (see
        :meth:`environment`; no secrets)."""
        keys = [p.api_key_env for p in self.config.providers.values() if p.api_key_env]
        policy = replace(self.config.tool_env, passed=self.config.tool_env_pass)
        return tool_environment(self.environment(environ), keys=keys, policy=policy)


def load_folder(cwd: str, environ: Mapping[str, str], trust: Trust) -> FolderSetup:
    """Read ``cwd``'s config, agents, MCP servers, Claude Code hooks and custom commands (in
    a worker thread). The sandbox's paths are not resolved: a run's setup gets them from
    :func:`with_sandbox_paths`.

    Raises:
        ConfigError: a config file cannot be used.
    """
    files = FolderFiles(cwd, environ, trust)
    place = files.place
    claude = claude_settings_from(files)
    # What the settings' env sets is the environment the rest is read in, as Claude Code
    # sets it in its own before it reads anything else ($ANTHROPIC_BASE_URL, ${VAR}).
    files.environ = {**environ, **claude.env}
    setup = FolderSetup(
        cwd,
        os.fspath(place.root),
        replace(config_from(files), claude_model=claude.model),
        agents_from(files),
        mcp_servers_from(files),
        None,
        place.trusted,
        claude,
        commands=commands_from(files),
        plugins=plugins_from(files),
        rules=claude_rules_from(files),
    )
    # Stdio servers also get what makes TLS and proxies work here (see mcp._environment).
    setup = replace(setup, mcp_config=with_environment(setup.mcp_config, files.environ, setup.tool_environment(environ)))
    return replace(setup, protected=protected_files(setup, trust))


def with_sandbox_paths(setup: FolderSetup, hidden: Iterable[str], walks: Walks | None = None) -> FolderSetup:
    """``setup`` with the paths the sandbox of a run there uses resolved (``hidden``: what
    the sandbox always hides). Blocking: it walks the writable folders for what they
    protect (bounded, see ``sandbox._protected``; ``walks``: what earlier walks read),
    which only a run needs, so that listing a big folder's agents or its config does not
    pay for it."""
    config = setup.config
    # What trust records and trusted entries run is read-only in the sandbox too.
    paths = sandbox_paths(
        setup.cwd, user=config.sandbox, project=config.project_sandbox, hidden=hidden, protect=setup.protected,
        walks=walks,
    )
    return replace(setup, sandbox_paths=paths)


#: The files at a project's root that widen what roost does when trusted.
WIDENING_FILES = (".mcp.json", ".roost/config.toml", ".claude/settings.json", ".claude/settings.local.json")


def protected_files(setup: FolderSetup, trust: Trust) -> tuple[str, ...]:
    """The project files a run in ``setup``'s folder must not change, as absolute real paths
    inside its root, sorted: what trust records or would record, and what any entry runs.

    That is: the widening files (:data:`WIDENING_FILES`, and agent files that widen),
    trusted or not (an untrusted folder's entries may be trusted one day); the files trust
    records for the folder; every project file a widening entry runs and is bound to (see
    ``_scripts``), trusted or not; and the project files the hooks and MCP servers that
    apply (the user's own included) name as paths. Existing files only. The sandbox makes
    them read-only to commands, and the file tools ask before writing them. Reads no
    content.
    """
    root = setup.root
    named = [os.path.join(root, name) for name in WIDENING_FILES]
    named += [item.source for item in setup.widening]
    named += list(trust.folders.get(root, {}))
    named += [script.path for item in setup.widening for script in item.runs if script.bound]
    files = project_files(named, root)
    # The user's own hooks and servers need no trust; what they run of the project is
    # protected all the same (named as a path: `touch marker` does not make it one).
    project = {item.source for item in setup.widening}
    for hook in setup.hooks:
        if hook.source not in project:
            files += named_files(_path_words(shell_words(hook.command)), root, (setup.cwd, root))
    for server in setup.mcp.values():
        if server.command is not None and server.source not in project:
            # A server without a cwd (the user's) runs in the daemon's folder: only its
            # absolute words can name a project file.
            words = _path_words(argv_words([server.command, *server.args]))
            files += named_files(words, root, [server.cwd] if server.cwd else [])
    return tuple(sorted(set(files)))


def _path_words(words: list[Word]) -> list[Word]:
    return [word for word in words if word.path]
