"""The daemon's MCP servers: one connection per server, shared by every session that has it.

Servers are keyed by what they are (:attr:`McpServerConfig.identity`: the resolved command,
args, env and cwd, or the URL and headers), never by name: two projects' servers of one name
are two servers, and configs that resolve to one server share its connection. Every method
takes the caller's own ``name -> config`` map (the configuration of a session's folder), so a
session reaches only the servers of its own configuration, under its own names
(``server__tool``).

Servers are started lazily (``ensure``, when a session first needs tools). Each runs in its
own task in the daemon's nursery (see ``_link``), which restarts it with backoff when
its connection is lost; meanwhile its tools are not offered and a call to one waits for it
within the call's timeout. The ``mcp`` SDK is imported when the first server starts, so the
daemon starts without it.

Lifetime: a server runs while the latest config ``ensure`` saw for some entry (a file and a
name) is that server. One that no entry's latest config is any more (the file was edited, or
the entry disabled), that no run holds (:meth:`McpManager.hold`) and that nothing has used
for IDLE_STOP seconds is stopped the next time ``ensure`` runs.

Error handling: nothing here raises for a server's failure. A server that cannot start is
``failed`` with the reason (and retried in the background); a call that fails, times out or
reaches a server that is not there is an error result the model can act on. Only
:meth:`McpManager.restart` raises, for a server that is not running (:class:`UnknownServer`).
"""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping

import trio

from roost.daemon.tools import ToolResult

from ._config import Identity, McpServerConfig
from ._content import McpPrompt, McpRequestError, McpResource, split_prompt_command
from ._status import log_file, status_map
from ._tools import McpTool, as_server, qualified_name, selected, split_name

if TYPE_CHECKING:
    from ._link import ServerLink

#: Seconds ``ensure`` and ``restart`` wait for servers to be ready or failed.
ENSURE_TIMEOUT = 40.0
#: Seconds ``aclose`` gives servers to close (the SDK's stdio close takes up to ~6 s), and
#: then cancelled ones to finish their shielded teardown.
CLOSE_TIMEOUT = 10.0
CANCEL_GRACE = 5.0
#: Seconds a server that no config is any more, and that no run holds, is kept running (in
#: case its config comes back) before it is stopped.
IDLE_STOP = 600.0


class UnknownServer(LookupError):
    """The server a config is does not run (never started, stopped, or disabled there)."""


class McpManager:
    """The MCP servers of the daemon and their tools.

    Resource handling: servers run as tasks in ``nursery`` (the daemon's). Call
    :meth:`aclose` before that nursery is cancelled, so that servers close normally
    (an HTTP session is only terminated by a normal close).
    """

    def __init__(self, nursery: trio.Nursery, log_dir: Path) -> None:
        self._nursery = nursery
        self._log_dir = log_dir
        #: The connection of each started server, by identity.
        self._servers: dict[Identity, ServerLink] = {}
        #: The server each config entry (its file and name) was the last time ``ensure`` saw it.
        self._latest: dict[tuple[str, str], Identity] = {}
        #: How many runs hold each server, and when each was last ensured or let go.
        self._held: Counter[Identity] = Counter()
        self._used: dict[Identity, float] = {}
        #: Connections whose task may still run (stopped ones until they are done).
        self._live: list[ServerLink] = []
        self._closed = False

    async def ensure(self, servers: Mapping[str, McpServerConfig], *, timeout: float = ENSURE_TIMEOUT) -> None:
        """Start every enabled server of ``servers`` that is not running; wait until each
        is ready or failed (at most ``timeout`` seconds in all).

        ``servers`` become their entries' latest configs, and servers left unused by that
        are stopped (see the module's docstring). After :meth:`aclose` it starts nothing.
        """
        if self._closed:
            return
        now = trio.current_time()
        for config in servers.values():
            entry = (config.source, config.name)
            if config.enabled:
                self._latest[entry] = config.identity
                self._used[config.identity] = now
            else:
                self._latest.pop(entry, None)
        self._stop_unused(now)
        waiting = [self._running(c) or self._start(c) for c in servers.values() if c.enabled]
        with trio.move_on_after(timeout):
            for connection in waiting:
                while connection.state == "starting":
                    await connection.wait_changed()

    @contextmanager
    def hold(self, servers: Mapping[str, McpServerConfig]) -> Iterator[None]:
        """Keep the servers of ``servers`` from being stopped as unused while the block runs
        (a run holds its servers for its whole life)."""
        held = Counter(config.identity for config in servers.values())
        self._held += held
        try:
            yield
        finally:
            self._held -= held
            now = trio.current_time()
            for identity in held:
                self._used[identity] = now

    def tools(self, servers: Mapping[str, McpServerConfig], names: Iterable[str] | None = None) -> list[McpTool]:
        """The tools of the ready servers of ``servers``, as ``name__tool`` with the names
        ``servers`` gives them; ``names`` keeps only those named exactly or matching a glob
        (``server__*``)."""
        patterns = None if names is None else tuple(names)
        found = []
        for name, config in servers.items():
            connection = self._running(config)
            if connection is not None and connection.state == "ready":
                offered = (as_server(tool, name) for tool in connection.tools)
                found += [tool for tool in offered if selected(tool.name, patterns)]
        return found

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        servers: Mapping[str, McpServerConfig],
        timeout: float | None = None,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> ToolResult:
        """Call the tool ``server__tool`` on the server that ``servers`` names ``server``;
        never raises (failures are error results).

        ``timeout`` (default: that config's) bounds the whole call, including waiting for a
        restarting server. Cancelling the caller cancels the call (the server is told).
        ``on_progress`` gets the server's progress notifications as
        ``{"progress", "total", "message"}`` maps.
        """
        parts = split_name(name)
        if parts is None:
            return ToolResult(f"{name!r} is not an MCP tool name (server__tool)", is_error=True)
        server = parts[0]
        config = servers.get(server)
        connection = None if config is None else self._running(config)
        if config is None or connection is None:
            return ToolResult(_no_server(server, config, servers), is_error=True)
        tool = next((t.tool for t in connection.tools if qualified_name(server, t.tool) == name), parts[1])
        limit = config.timeout if timeout is None else timeout
        return await connection.call(server, tool, arguments, timeout=limit, on_progress=on_progress)

    def prompts(self, servers: Mapping[str, McpServerConfig]) -> list[McpPrompt]:
        """The prompts of the ready servers of ``servers``, under the names ``servers``
        gives those servers."""
        return [replace(p, server=name) for name, link in self._ready(servers) for p in link.prompts]

    def resources(self, servers: Mapping[str, McpServerConfig]) -> list[McpResource]:
        """The resources the ready servers of ``servers`` list, as :meth:`prompts`."""
        return [replace(r, server=name) for name, link in self._ready(servers) for r in link.resources]

    async def get_prompt(
        self, command: str, arguments: Mapping[str, str], servers: Mapping[str, McpServerConfig]
    ) -> tuple[McpPrompt, Any]:
        """The prompt whose command (``mcp__server__prompt``) is ``command`` among
        ``servers``' prompts, and its ``GetPromptResult`` with ``arguments``.

        Raises:
            McpRequestError: no such server or prompt, or the server failed the request.
        """
        from ._link import get_prompt  # loaded already: the server runs

        prompt = self.find_prompt(command, servers)
        link = self._link(prompt.server, servers)
        return prompt, await get_prompt(link, prompt.server, prompt.prompt, arguments, servers[prompt.server].timeout)

    def find_prompt(self, command: str, servers: Mapping[str, McpServerConfig]) -> McpPrompt:
        """The prompt ``/command`` names (see :meth:`get_prompt`).

        Raises:
            McpRequestError: no such server, or no such prompt on it.
        """
        parts = split_prompt_command(command)
        if parts is None:
            raise McpRequestError(f"/{command} is not an MCP prompt (/mcp__server__prompt)")
        link = self._link(parts[0], servers)
        offered = [replace(p, server=parts[0]) for p in link.prompts]
        found = next((p for p in offered if p.command == command), None)
        if found is None:
            known = ", ".join("/" + p.command for p in offered) or "none"
            raise McpRequestError(f"MCP server {parts[0]} has no prompt {parts[1]!r} (its prompts: {known})")
        return found

    async def read_resource(self, server: str, uri: str, servers: Mapping[str, McpServerConfig]) -> Any:
        """The ``ReadResourceResult`` of ``uri`` from the server ``servers`` names ``server``.

        Raises:
            McpRequestError: no such server, or it failed the request.
        """
        from ._link import read_resource  # loaded already: the server runs

        link = self._link(server, servers)
        return await read_resource(link, server, uri, servers[server].timeout)

    def _ready(self, servers: Mapping[str, McpServerConfig]) -> Iterator[tuple[str, ServerLink]]:
        for name, config in sorted(servers.items()):
            link = self._running(config)
            if link is not None and link.state == "ready":
                yield name, link

    def _link(self, server: str, servers: Mapping[str, McpServerConfig]) -> ServerLink:
        config = servers.get(server)
        link = None if config is None else self._running(config)
        if config is None or link is None:
            raise McpRequestError(_no_server(server, config, servers))
        return link

    def status(
        self, servers: Mapping[str, McpServerConfig], untrusted: Mapping[str, McpServerConfig] | None = None
    ) -> list[dict[str, Any]]:
        """One map per server of ``servers``, by name: ``{name, state, transport, pid, url,
        tools, error, restarts, enabled, source, log, stderr}`` (``stderr``: a stdio server's last
        lines there when it failed or was lost); ``stopped`` when the server that
        config is does not run (or the config is disabled). Servers of ``untrusted`` files
        are listed ``untrusted``: never started for them."""
        listing = [
            status_map(config, "untrusted", log_file(self._log_dir, config), error="its file is not trusted (roost trust)")
            for _, config in sorted((untrusted or {}).items())
        ]
        for _, config in sorted(servers.items()):
            connection = self._running(config)
            if connection is not None:
                listing.append(connection.status(config))
            else:
                listing.append(status_map(config, "stopped", log_file(self._log_dir, config)))
        return listing

    async def restart(self, config: McpServerConfig) -> None:
        """Close the connection of the server ``config`` is, and connect again now (no
        backoff); wait until it is ready or failed. Every session sharing it sees that.

        Raises:
            UnknownServer: that server does not run, or ``config`` is disabled.
        """
        connection = None if self._closed else self._running(config)
        if connection is None:
            raise UnknownServer(f"MCP server {config.name} is not running")
        before = connection.attempts
        connection.restart()
        with trio.move_on_after(ENSURE_TIMEOUT):
            while connection.attempts <= before or connection.state == "starting":
                await connection.wait_changed()

    async def aclose(self) -> None:
        """Close every server, concurrently, within about CLOSE_TIMEOUT + CANCEL_GRACE seconds.

        Resource handling: shielded from the caller's cancellation; each server leaves its
        contexts normally, and one still running after CLOSE_TIMEOUT is cancelled.
        """
        self._closed = True
        live = [c for c in self._live if not c.done.is_set()]
        with trio.CancelScope(shield=True):
            for connection in live:
                connection.stop()
            for grace, then_cancel in ((CLOSE_TIMEOUT, True), (CANCEL_GRACE, False)):
                with trio.move_on_after(grace):
                    for connection in live:
                        await connection.done.wait()
                if then_cancel:
                    for connection in live:
                        connection.cancel()
        self._live = []

    def _running(self, config: McpServerConfig) -> ServerLink | None:
        """The connection of the server ``config`` is, if started (never for a disabled one)."""
        return self._servers.get(config.identity) if config.enabled else None

    def _start(self, config: McpServerConfig) -> ServerLink:
        # Imported here: the mcp SDK costs ~0.5 s to import, paid when a server is first needed.
        from ._link import ServerLink

        self._live = [c for c in self._live if not c.done.is_set()]
        connection = ServerLink(config, self._log_dir)
        self._servers[config.identity] = connection
        self._live.append(connection)
        self._nursery.start_soon(connection.run, name=f"mcp server {config.name}")
        return connection

    def _stop_unused(self, now: float) -> None:
        """Stop the servers no entry's latest config is, no run holds, and nothing used for
        IDLE_STOP seconds."""
        latest = set(self._latest.values())
        for identity, connection in list(self._servers.items()):
            recent = now - self._used.get(identity, now) < IDLE_STOP
            if identity in latest or self._held[identity] or recent:
                continue
            del self._servers[identity]
            self._used.pop(identity, None)
            connection.stop()
            self._nursery.start_soon(self._retire, connection)

    async def _retire(self, old: ServerLink) -> None:
        """Give a stopped server CLOSE_TIMEOUT to close, then cancel it."""
        with trio.move_on_after(CLOSE_TIMEOUT):
            await old.done.wait()
        old.cancel()


def _no_server(server: str, config: McpServerConfig | None, servers: Mapping[str, McpServerConfig]) -> str:
    """Why a call to ``server`` reaches nothing, for the model."""
    if config is None:
        return f"no MCP server named {server} here (configured: {', '.join(sorted(servers)) or 'none'})"
    if not config.enabled:
        return f"MCP server {server} is disabled in {config.source}"
    return f"MCP server {server} is not running"
