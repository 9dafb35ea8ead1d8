"""The daemon's MCP servers: one connection per server, shared by every session.

Servers are started lazily (``ensure``, when a session first needs tools) and keyed by name:
``ensure`` with a different config for a running name replaces that server. Each server runs
in its own task in the daemon's nursery (see ``_connection``), which restarts it with backoff
when its connection is lost; meanwhile its tools are not offered and a call to one waits for
it within the call's timeout. The ``mcp`` SDK is imported when the first server starts, so the
daemon starts without it.

Error handling: nothing here raises for a server's failure. A server that cannot start is
``failed`` with the reason (and retried in the background); a call that fails, times out or
reaches a server that is not there is an error result the model can act on. Only
:meth:`McpManager.restart` raises, for a name it does not know (:class:`UnknownServer`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import trio

from roost.daemon.tools import ToolResult

from ._config import McpServerConfig
from ._status import log_file, status_map
from ._tools import McpTool, selected, split_name

if TYPE_CHECKING:
    from ._connection import ServerConnection

#: Seconds ``ensure`` and ``restart`` wait for servers to be ready or failed.
ENSURE_TIMEOUT = 40.0
#: Seconds ``aclose`` gives servers to close (the SDK's stdio close takes up to ~6 s), and
#: then cancelled ones to finish their shielded teardown.
CLOSE_TIMEOUT = 10.0
CANCEL_GRACE = 5.0


class UnknownServer(LookupError):
    """No running server has that name (never configured, or disabled)."""


class McpManager:
    """The MCP servers of the daemon and their tools.

    Resource handling: servers run as tasks in ``nursery`` (the daemon's). Call
    :meth:`aclose` before that nursery is cancelled, so that servers close normally
    (an HTTP session is only terminated by a normal close).
    """

    def __init__(self, nursery: trio.Nursery, log_dir: Path) -> None:
        self._nursery = nursery
        self._log_dir = log_dir
        #: The current connection of each started server.
        self._servers: dict[str, ServerConnection] = {}
        #: Every server ``ensure`` was given, enabled or not.
        self._configs: dict[str, McpServerConfig] = {}
        #: Connections whose task may still run (replaced ones until they are done).
        self._live: list[ServerConnection] = []
        self._closed = False

    async def ensure(self, servers: Mapping[str, McpServerConfig], *, timeout: float = ENSURE_TIMEOUT) -> None:
        """Start every enabled server of ``servers`` not yet started; wait until each is
        ready or failed (at most ``timeout`` seconds in all).

        A running server whose config differs is replaced (stopped, then started anew); a
        server now disabled is stopped. Servers not in ``servers`` are left as they are.
        After :meth:`aclose` it starts nothing.
        """
        if self._closed:
            return
        waiting: list[ServerConnection] = []
        for name, config in servers.items():
            self._configs[name] = config
            current = self._servers.get(name)
            if current is not None and current.config == config and not current.stopping:
                waiting.append(current)
                continue
            if current is not None:
                current.stop()
                del self._servers[name]
            if config.enabled:
                waiting.append(self._start(config, after=current))
        with trio.move_on_after(timeout):
            for connection in waiting:
                while connection.state == "starting":
                    await connection.wait_changed()

    def tools(self, names: Iterable[str] | None = None) -> list[McpTool]:
        """The tools of ready servers, as ``server__tool``; ``names`` keeps only those named
        exactly or matching a glob (``server__*``)."""
        patterns = None if names is None else tuple(names)
        return [
            tool
            for connection in self._servers.values()
            if connection.state == "ready"
            for tool in connection.tools
            if selected(tool.name, patterns)
        ]

    async def call(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        timeout: float | None = None,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> ToolResult:
        """Call the tool ``server__tool``; never raises (failures are error results).

        ``timeout`` (default: the server's) bounds the whole call, including waiting for a
        restarting server. Cancelling the caller cancels the call (the server is told).
        ``on_progress`` gets the server's progress notifications as
        ``{"progress", "total", "message"}`` maps.
        """
        parts = split_name(name)
        connection = self._servers.get(parts[0]) if parts else None
        if parts is None or connection is None:
            return ToolResult(self._no_server(name, parts[0] if parts else None), is_error=True)
        tool = next((t.tool for t in connection.tools if t.name == name), parts[1])
        limit = connection.config.timeout if timeout is None else timeout
        return await connection.call(tool, arguments, timeout=limit, on_progress=on_progress)

    def status(self, servers: Mapping[str, McpServerConfig] | None = None) -> list[dict[str, Any]]:
        """One map per server: ``{name, state, transport, pid, url, tools, error, restarts,
        enabled, source, log}``.

        Without ``servers``: every server ``ensure`` was given. With them (a project's
        config): those servers, each ``stopped`` unless it runs with that same config.
        """
        configs = self._configs if servers is None else servers
        listing = []
        for name, config in sorted(configs.items()):
            connection = self._servers.get(name)
            if connection is not None and connection.config == config:
                listing.append(connection.status())
            else:
                listing.append(status_map(config, "stopped", log_file(self._log_dir, name)))
        return listing

    async def restart(self, name: str) -> None:
        """Close server ``name``'s connection and connect again now (no backoff); wait until
        it is ready or failed.

        Raises:
            UnknownServer: no running server has that name.
        """
        connection = self._servers.get(name)
        if connection is None or self._closed:
            raise UnknownServer(self._no_server(f"{name}__", name))
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

    def _start(self, config: McpServerConfig, *, after: ServerConnection | None) -> ServerConnection:
        # Imported here: the mcp SDK costs ~0.5 s to import, paid when a server is first needed.
        from ._connection import ServerConnection

        self._live = [c for c in self._live if not c.done.is_set()]
        connection = ServerConnection(config, self._log_dir, after=after)
        self._servers[config.name] = connection
        self._live.append(connection)
        if after is not None:
            self._nursery.start_soon(self._retire, after)
        self._nursery.start_soon(connection.run, name=f"mcp server {config.name}")
        return connection

    async def _retire(self, old: ServerConnection) -> None:
        """Give a replaced server CLOSE_TIMEOUT to close, then cancel it."""
        with trio.move_on_after(CLOSE_TIMEOUT):
            await old.done.wait()
        old.cancel()

    def _no_server(self, name: str, server: str | None) -> str:
        running = sorted(self._servers)
        known = f"; running: {', '.join(running)}" if running else "; none is running"
        if server is None:
            return f"{name!r} is not an MCP tool name (server__tool){known}"
        config = self._configs.get(server)
        if config is not None and not config.enabled:
            return f"MCP server {server} is disabled in {config.source}"
        return f"no MCP server named {server}{known}"
