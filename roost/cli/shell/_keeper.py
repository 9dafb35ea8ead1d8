"""Staying connected: the shell's connection to the daemon, and the tasks that use it.

When the connection ends (the daemon stopped or restarted) the keeper keeps trying to
connect, and re-attaches from the last ``seq`` the shell saw, so the daemon replays exactly
what it missed. It starts a daemon only when the person asks for something while none is
there (as every roost command does: :meth:`ConnectionKeeper.ready`). A ``lagged`` notice
(this terminal fell behind) is handled the same way, on the same connection
(:meth:`ConnectionKeeper.reattach`).

What the shell asks of the daemon runs as a task of the keeper's
(:meth:`ConnectionKeeper.spawn`): a refusal or a lost connection is shown, never raised into
the screen. On each connection the keeper learns what completion offers (models, agents,
sessions, custom commands), and while the shell runs it looks every few seconds at how many
clients are attached.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Awaitable

from roost.protocol import ConnectionClosed, RoostError, RpcError, Timeout
from roost.protocol.asyncio_client import AsyncClient

from .._connect import EXIT_REFUSED, START_TIMEOUT, DaemonError, env_param, start_daemon
from . import _display as r

if TYPE_CHECKING:
    from ._shell import Shell

#: The name this shell gives in ``hello``: answers to approvals are attributed to it.
CLIENT_NAME = "shell"
#: Seconds between two looks at how many clients are attached.
CLIENTS_EVERY = 2.0
#: Seconds between redraws while something moves (spinner, elapsed time).
TICK = 0.1


class ConnectionKeeper:
    """The connection of one shell (:attr:`client`: None while there is none), kept up.

    Resource handling:
        :meth:`start` starts its tasks; :meth:`close` cancels them and every task
        :meth:`spawn` started, waits for them, and closes the connection.
    """

    def __init__(self, shell: Shell, timeout: float | None) -> None:
        self._shell = shell
        self._timeout = timeout
        self.client: AsyncClient | None = None
        self._connected = asyncio.Event()
        self._own: tuple[asyncio.Task[None], ...] = ()
        self._tasks: set[asyncio.Task[None]] = set()
        self._next_clients = 0.0

    @property
    def connected(self) -> bool:
        """Whether the shell is attached now."""
        return self._connected.is_set()

    def start(self) -> None:
        """Start connecting (and keep connecting), and the ticks that redraw what moves."""
        keeper = asyncio.create_task(self._stay_connected())
        keeper.add_done_callback(self._keeper_done)
        self._own = (keeper, asyncio.create_task(self._tick()))

    async def close(self) -> None:
        """Cancel every task, wait for them, and close the connection."""
        tasks = (*self._own, *self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.client is not None:
            await self.client.aclose()

    def spawn(self, work: Awaitable[Any], *, quiet: bool = False) -> None:
        """Run ``work`` as a task of the shell's; a failure is shown (unless ``quiet``)."""
        screen = self._shell.screen

        async def guarded() -> None:
            try:
                await work
            except RpcError as exc:
                if not quiet:
                    screen.print(r.error(f"{exc.message.strip()} [{exc.name}]"))
            except ConnectionClosed:
                if not quiet:
                    screen.print(r.note("(not done: no connection to the daemon)", "class:warn.bold"))
            except Timeout as exc:
                if not quiet:
                    screen.print(r.note(f"(not done: {exc}; reconnecting)", "class:warn.bold"))
            except asyncio.TimeoutError:
                if not quiet:
                    screen.print(r.note("(not done: the daemon did not come back in time)", "class:warn.bold"))

        task = asyncio.create_task(guarded())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def ready(self) -> AsyncClient:
        """The connection, waiting for it (and starting a daemon) if there is none now."""
        client = self.client
        if client is not None and self._connected.is_set():
            return client
        try:
            await asyncio.wait_for(self._connected.wait(), 1.0)
        except asyncio.TimeoutError:
            self._shell.screen.print(r.note("(no daemon: starting one)"))
            await self._start_daemon()
            await asyncio.wait_for(self._connected.wait(), START_TIMEOUT)
        assert self.client is not None
        return self.client

    async def reattach(self) -> None:
        """Attach again from the last seq seen (this terminal fell behind)."""
        client = await self.ready()
        view = self._shell.view
        await client.call("attach", session=view.session, since=view.last_seq)

    # -- the connection ------------------------------------------------------------------------

    async def _stay_connected(self) -> None:
        """Connect, attach from the last seq seen, wait for the end; again, until cancelled.

        Raises:
            RpcError: the daemon refused the handshake or the attach (the shell ends).
        """
        shell = self._shell
        delay = 0.05
        attached_before = False
        while True:
            try:
                client = await self._open(start=False)
            except (OSError, ConnectionClosed, Timeout):
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            delay = 0.05
            self.client = client
            try:
                since = shell.view.last_seq
                await client.call("attach", session=shell.view.session, since=since)
                # The history is on screen before the toolbar says the shell is attached.
                shell.screen.flush()
                if attached_before:
                    shell.screen.print(r.note(f"(back: re-attached from seq {since})"))
                attached_before = True
                self._connected.set()
                shell.screen.invalidate()
                self.spawn(self._learn_names(client))
                await client.wait_closed()
            except (ConnectionClosed, Timeout):
                pass
            finally:
                self._connected.clear()
                self.client = None
                await client.aclose()
            shell.screen.print(shell.transcript.finish()
                               + r.note(f"(lost the daemon at seq {shell.view.last_seq}; reconnecting)",
                                        "class:warn.bold"))
            shell.screen.invalidate()

    def _keeper_done(self, task: asyncio.Task[None]) -> None:
        # The connection keeper only ends on its own when the daemon refuses this shell
        # (or on a bug): with nothing to show, the shell ends too, saying why.
        if task.cancelled() or task.exception() is None:
            return
        error = task.exception()
        if isinstance(error, RpcError):
            message = f"{error.message} [{error.name}]"
        else:
            message = str(error) if isinstance(error, RoostError) else repr(error)
        shell = self._shell
        shell.farewell = f"roost: the shell cannot go on with session {shell.view.session}: {message}"
        shell.status = EXIT_REFUSED
        shell.screen.exit()

    async def _open(self, *, start: bool) -> AsyncClient:
        """A new connection to the daemon (over ssh for a remote host: ``start`` lets the
        remote bridge start the daemon there)."""
        target = self._shell.target
        on_event = self._shell.take
        host = target.host
        if host is None:
            return await AsyncClient.open(target.socket, client=CLIENT_NAME,
                                          on_notification=on_event, timeout=self._timeout)
        return await AsyncClient.open_ssh(host.ssh.url, command=host.roost, start=start, client=CLIENT_NAME,
                                          on_notification=on_event, timeout=self._timeout)

    async def _start_daemon(self) -> None:
        """Start the daemon (a remote one: by connecting with a bridge that starts it).

        Raises:
            ConnectionClosed: it could not be started (or reached); the message says why.
        """
        target = self._shell.target
        if target.host is None:
            try:
                await asyncio.to_thread(start_daemon, target.socket)
            except DaemonError as exc:
                raise ConnectionClosed(exc.message) from None
            return
        try:
            client = await self._open(start=True)
        except (OSError, Timeout) as exc:
            raise ConnectionClosed(str(exc)) from None
        await client.aclose()

    async def _tick(self) -> None:
        shell = self._shell
        while True:
            await asyncio.sleep(TICK)
            shell.transcript.width = shell.screen.width
            view = shell.view
            if view.run is not None or view.pending or not self._connected.is_set():
                shell.screen.invalidate()
            if self.client is not None and self._connected.is_set() and time.monotonic() > self._next_clients:
                self._next_clients = time.monotonic() + CLIENTS_EVERY
                self.spawn(self.refresh_sessions(self.client), quiet=True)

    # -- what completion offers --------------------------------------------------------------

    async def _learn_names(self, client: AsyncClient) -> None:
        """What completion offers: models, agents, sessions, custom commands."""
        shell = self._shell
        providers = await client.call("providers.list", cwd=shell.cwd(), **env_param(shell.target))
        models = [providers.get("default_model") or "", "scripted/demo"]
        for provider in providers.get("providers", []):
            models += [f"{provider['name']}/{alias}" for alias in provider.get("models") or {}]
        shell.names.models[:] = sorted({m for m in models if m})
        if client.has("agents.list"):
            agents = (await client.call("agents.list", cwd=shell.cwd())).get("agents", [])
            # Once each: a project's untrusted agent may share a name with another.
            shell.names.agents[:] = dict.fromkeys(a["name"] if isinstance(a, dict) else str(a) for a in agents)
        await self.refresh_commands(client)
        await self.refresh_sessions(client)

    async def refresh_commands(self, client: AsyncClient) -> None:
        """The folder's custom commands, as they are now."""
        shell = self._shell
        if not client.has("commands.list"):
            return
        listed = await client.call("commands.list", cwd=shell.cwd(), **env_param(shell.target))
        shell.names.commands[:] = [
            (c.get("short") or c["name"], c.get("argument_hint") or "", c.get("description") or "")
            for c in listed.get("commands", [])
        ]

    async def refresh_sessions(self, client: AsyncClient) -> list[dict[str, Any]]:
        """The daemon's sessions (``sessions.list`` rows), and this one's attached clients."""
        shell = self._shell
        rows: list[dict[str, Any]] = (await client.call("sessions.list"))["sessions"]
        shell.names.sessions[:] = [(row["id"], f"{row.get('status', '')} · {row.get('cwd', '')}")
                                   for row in reversed(rows)]
        for row in rows:
            if row["id"] == shell.view.session and row.get("clients") != shell.view.clients:
                shell.view.clients = row.get("clients")
                shell.screen.invalidate()
        return rows
