"""One MCP server: the task that owns its connection, its state, and calls through it.

The state moves only in the connection's own task::

    starting --initialize and tools/list answered--> ready
    starting --spawn, initialize or tools/list failed--> failed (error says why)
    ready --connection lost--> starting (error says why)
    failed, or starting after a loss --backoff--> starting (a new attempt)
    any --stop()--> stopped (the task ends)

Resource handling: ``run`` enters the transport (``stdio_client`` or
``streamable_http_client``) and the ``ClientSession`` and leaves them itself, because anyio
contexts must be entered and exited in one task; callers only send requests through the
session. A stdio server's end of output, or an HTTP failure that ends the transport, ends the
attempt; the task waits out the backoff (0.5 s doubling to 30 s, back to 0.5 s once a
connection has stayed up 10 s) and connects again. ``stop()`` makes the task leave its
contexts normally (so an HTTP session is terminated with DELETE, and a stdio server gets the
SDK's close-stdin, SIGTERM, SIGKILL sequence); ``cancel()`` is the last resort.
Each attempt appends to the server's log file (:class:`ServerLog`): our notes, the server's
stderr (stdio) and the log messages it sends.

This module imports the ``mcp`` SDK: the manager imports it when it starts its first server.
"""

from __future__ import annotations

import logging
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Callable, Mapping, TextIO

import anyio
import httpx2
import mcp_types
import trio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

import roost
from roost.daemon.tools import ToolResult

from ._config import McpServerConfig
from ._content import McpPrompt, McpRequestError, McpResource, mcp_prompt, mcp_resource
from ._process import MARKER, find_child
from ._server_log import ServerLog
from ._status import State, log_file, status_map
from ._tools import McpTool, has_media, mcp_tool, qualified_name, tool_result

log = logging.getLogger(__name__)

#: Seconds for a server to answer initialize and tools/list.
START_TIMEOUT = 30.0
BACKOFF_START = 0.5
BACKOFF_MAX = 30.0
#: Seconds a connection must have stayed up for the backoff to start again from 0.5 s.
STABLE_AFTER = 10.0
#: How many of a stdio server's last stderr lines ``mcp.list`` shows when it failed or was lost.
STDERR_LINES = 8
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)  # the SDK's defaults: SSE streams stay open
_CLIENT = mcp_types.Implementation(name="roost", version=roost.__version__)
#: The notifications that make a list old, and which.
_CHANGED = {
    "notifications/tools/list_changed": "tools",
    "notifications/prompts/list_changed": "prompts",
    "notifications/resources/list_changed": "resources",
}


class ServerLink:
    """One server's connection, shared by every session whose config has its identity.

    ``config`` is the one it was started with; its name is the one our notes use (callers
    pass their own name for what the model sees).

    Resource handling: the manager starts :meth:`run` in the daemon's nursery; it returns
    (``done`` is set) after :meth:`stop`, or when cancelled.
    """

    def __init__(self, config: McpServerConfig, log_dir: Path) -> None:
        self.config = config
        self.log_path = log_file(log_dir, config)
        self.state: State = "starting"
        #: Why the last attempt failed or the last connection was lost (None once ready).
        self.error: str | None = None
        #: A stdio server's last stderr lines when it failed or was lost (empty once ready).
        self.stderr: tuple[str, ...] = ()
        self.pid: int | None = None
        #: Attempts after the first.
        self.restarts = 0
        self.attempts = 0
        self.tools: list[McpTool] = []
        #: What a ready server lists (empty when it declares no prompts or resources).
        self.prompts: list[McpPrompt] = []
        self.resources: list[McpResource] = []
        #: Set when ``run`` has returned.
        self.done = trio.Event()
        self._session: ClientSession | None = None
        self._log = ServerLog(self.log_path, config.name)
        self._marker: str | None = None  # a stdio server's ROOST_MCP_SERVER value (see _process)
        self._scope = trio.CancelScope()
        self._startup = trio.CancelScope()
        self._changed = trio.Event()  # replaced at every state change
        self._wake = trio.Event()  # set by whatever the task must look at
        self._stopping = False
        self._restarting = False
        self._lost = False
        self._stale: set[str] = set()  # the lists a list_changed notification made old
        self._delay = BACKOFF_START

    # -- for the manager ---------------------------------------------------------------------

    async def run(self) -> None:
        """Connect, serve, reconnect with backoff, until :meth:`stop` (or cancellation)."""
        try:
            with self._scope:
                while not self._stopping:
                    if self._restarting:
                        self._restarting = False
                        self._delay = BACKOFF_START
                    self._set("starting")
                    ready_for = await self._attempt()
                    if self._stopping or self._restarting:
                        continue
                    if ready_for is None:
                        self._set("failed")
                    elif ready_for >= STABLE_AFTER:
                        self._delay = BACKOFF_START
                    await self._pause(self._delay)
                    self._delay = min(self._delay * 2, BACKOFF_MAX)
        finally:
            self._forget()
            self._set("stopped")
            self.done.set()

    def stop(self) -> None:
        """Ask the task to close the connection and end (it does not wait)."""
        self._stopping = True
        self._startup.cancel()
        self._wake.set()

    def restart(self) -> None:
        """Ask the task to close the connection and connect again at once."""
        self._restarting = True
        self._startup.cancel()
        self._wake.set()

    def cancel(self) -> None:
        """Cancel the task (after :meth:`stop` took too long)."""
        self._scope.cancel()

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopping

    async def wait_changed(self) -> None:
        """Return at the next state change."""
        await self._changed.wait()

    @property
    def session(self) -> ClientSession | None:
        """The SDK session while the server is ready."""
        return self._session

    def status(self, config: McpServerConfig) -> dict[str, Any]:
        """The map ``mcp.list`` shows for this server, configured as ``config``."""
        return status_map(config, self.state, self.log_path, pid=self.pid, tools=len(self.tools),
                          error=self.error, restarts=self.restarts, stderr=self.stderr)

    async def call(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any],
        *,
        timeout: float,
        on_progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> ToolResult:
        """Call ``tool`` (the server's own name for it) for a caller that names this server
        ``server``; every failure is an error result.

        Waits for a starting server within ``timeout``, which bounds the whole call; a
        cancelled or timed-out call sends the MCP cancellation for it (the SDK does).
        """
        shown = qualified_name(server, tool)
        meta = {"server": server}
        progress = None if on_progress is None else _Progress(on_progress)
        try:
            with trio.move_on_after(timeout):
                while self.state == "starting":
                    await self._changed.wait()
                session = self._session
                if self.state != "ready" or session is None:
                    return ToolResult(_unavailable(server, self.state, self.error), is_error=True, meta=meta)
                try:
                    result = await session.call_tool(tool, dict(arguments), progress_callback=progress)
                except MCPError as exc:
                    return ToolResult(_call_error(server, shown, exc), is_error=True, meta=meta)
                except Exception as exc:  # a malformed result, an unexpected result kind
                    log.exception("MCP call %s failed", shown)
                    return ToolResult(f"{shown} failed: {type(exc).__name__}: {exc}", is_error=True, meta=meta)
                # Images are checked and may be scaled: off the event loop.
                mapped = await trio.to_thread.run_sync(tool_result, result) if has_media(result) else tool_result(result)
                return ToolResult(mapped.text, mapped.is_error, {**meta, **mapped.meta}, mapped.parts)
            return ToolResult(
                f"{shown} timed out after {timeout:g} s; the call was cancelled",
                is_error=True,
                meta={**meta, "timeout": True},
            )
        finally:
            if progress is not None:
                progress.close()

    # -- the task ----------------------------------------------------------------------------

    async def _attempt(self) -> float | None:
        """One connection, from spawn or connect to its end; seconds it was ready (None: never)."""
        self.attempts += 1
        self.restarts = self.attempts - 1
        self._lost = False
        self._stale = set()
        self._marker = None
        self._startup = trio.CancelScope()
        ready_at: list[float] = []
        before = self.error
        try:
            await self._connect_and_serve(ready_at)
            # Closing the connection ourselves also ends the stream: only a loss counts.
            if self._lost and not (self._stopping or self._restarting):
                self.error = "the connection closed (the server exited or closed its output)"
        except* Exception as group:
            self.error = _start_error(self.config, group)
        finally:
            self._forget()
        if self.error and not (self._stopping or self._restarting):
            if self.config.transport == "stdio":
                self.stderr = self._log.tail(STDERR_LINES)
            # A server that keeps failing the same way is retried for ever: say it once.
            log.log(logging.DEBUG if self.error == before else logging.WARNING,
                    "MCP server %s (%s): %s", self.config.name, self.log_path.name, self.error)
            self._log.note(self.error)
        return trio.current_time() - ready_at[0] if ready_at else None

    async def _connect_and_serve(self, ready_at: list[float]) -> None:
        async with AsyncExitStack() as stack:
            errlog = stack.enter_context(self._log.attempt())
            self._marker = None if self.config.transport == "http" else uuid.uuid4().hex
            transport = await _transport(self.config, self._marker, stack, errlog, self._log, self.attempts)
            read, write = await stack.enter_async_context(transport)
            session = await stack.enter_async_context(
                ClientSession(
                    _WatchedStream(read, self._on_end),
                    write,
                    message_handler=self._on_message,
                    logging_callback=self._on_log,
                    client_info=_CLIENT,
                )
            )
            with self._startup:
                try:
                    with trio.fail_after(START_TIMEOUT):
                        capabilities = (await session.initialize()).capabilities
                        tools = await self._list_tools(session)
                        for kind in ("prompts", "resources"):
                            if getattr(capabilities, kind, None) is not None:
                                await self._refresh(session, kind)
                except trio.TooSlowError:
                    raise TimeoutError(f"no answer to initialize and tools/list within {START_TIMEOUT:g} s") from None
            if self._startup.cancelled_caught:
                return  # stop() or restart() during the start
            if self._marker is not None:
                # Only now: the child has surely finished exec (it answered), so its
                # environment shows the marker; just after the spawn it may not yet.
                self.pid = await trio.to_thread.run_sync(find_child, self._marker)
            self._session, self.tools, self.error, self.stderr = session, tools, None, ()
            ready_at.append(trio.current_time())
            self._log.note(f"ready: {len(tools)} tools")
            self._set("ready")
            try:
                await self._serve(session)
            finally:
                # Unavailable from now on, while the connection closes (which may take seconds).
                self._forget()
                self._set("starting")

    async def _serve(self, session: ClientSession) -> None:
        """Until stop, restart or the end of the connection; refresh the tools when told."""
        while not (self._stopping or self._restarting or self._lost):
            if self._stale:
                kind = self._stale.pop()
                if kind != "tools":
                    await self._refresh(session, kind)
                    continue
                try:
                    with trio.fail_after(START_TIMEOUT):
                        self.tools = await self._list_tools(session)
                    self._log.note(f"tool list changed: {len(self.tools)} tools")
                except Exception as exc:
                    # The old list stays; a lost connection shows up as _lost next.
                    self._log.note(f"tools/list after a change failed: {exc!r}")
                continue
            await self._wake.wait()
            self._wake = trio.Event()

    async def _pause(self, seconds: float) -> None:
        """Wait out a backoff; stop() or restart() ends it early."""
        with trio.move_on_after(seconds):
            while not (self._stopping or self._restarting):
                await self._wake.wait()
                self._wake = trio.Event()

    async def _refresh(self, session: ClientSession, kind: str) -> None:
        """List the server's prompts or resources again; a failure keeps the old list and
        is noted (a prompt or resource the server cannot list blocks nothing)."""
        try:
            with trio.fail_after(START_TIMEOUT):
                listed = await _every_page(session, kind)
        except Exception as exc:
            return self._log.note(f"{kind}/list failed: {exc!r}")
        if kind == "prompts":
            self.prompts = [mcp_prompt(self.config.name, p) for p in listed]
        else:
            self.resources = [mcp_resource(self.config.name, r) for r in listed]

    async def _list_tools(self, session: ClientSession) -> list[McpTool]:
        tools: dict[str, McpTool] = {}
        for tool in await _every_page(session, "tools"):
            mapped = mcp_tool(self.config.name, tool)
            if mapped.name in tools:
                self._log.note(f"tool {tool.name!r} left out: its name clashes with {tools[mapped.name].tool!r}")
                continue
            tools[mapped.name] = mapped
        return list(tools.values())

    def _forget(self) -> None:
        """No session, process or lists: the connection is gone or going."""
        self._session, self.pid, self.tools, self.prompts, self.resources = None, None, [], [], []

    # -- callbacks from the SDK's tasks ------------------------------------------------------

    def _on_end(self) -> None:
        self._lost = True
        self._wake.set()

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            self._log.note(f"transport error: {message!r}")
        elif (kind := _CHANGED.get(getattr(message, "method", None) or "")) is not None:
            self._stale.add(kind)
            self._wake.set()

    async def _on_log(self, params: Any) -> None:
        self._log.note(f"[{params.level}] {params.logger + ': ' if params.logger else ''}{params.data}")

    # -- the state ---------------------------------------------------------------------------

    def _set(self, state: State) -> None:
        self.state = state
        self._changed.set()
        self._changed = trio.Event()


class _WatchedStream:
    """The transport's read stream, telling its owner when it ends (the connection is gone)."""

    def __init__(self, inner: Any, on_end: Callable[[], None]) -> None:
        self._inner, self._on_end = inner, on_end

    @property
    def last_context(self) -> Any:
        # The dispatcher reads the sender's contextvars from here on streamable HTTP.
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._on_end()
            raise

    def __aiter__(self) -> _WatchedStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedStream:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class _Progress:
    """Hands a call's progress notifications to its caller until the call ends.

    The SDK delivers them from its own tasks, so one can arrive after the result: dropped,
    so that the caller never hears of a call it has finished with.
    """

    def __init__(self, on_progress: Callable[[dict[str, Any]], None]) -> None:
        self._on_progress: Callable[[dict[str, Any]], None] | None = on_progress

    # The SDK's ProgressFnT, parameter names and all.
    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        if self._on_progress is None:
            return
        try:
            self._on_progress({"progress": progress, "total": total, "message": message})
        except Exception:
            log.exception("on_progress failed")

    def close(self) -> None:
        self._on_progress = None


async def _transport(
    config: McpServerConfig, marker: str | None, stack: AsyncExitStack, errlog: TextIO, notes: ServerLog, attempt: int
) -> Any:
    """The transport's context manager for one attempt: an HTTP client is entered on
    ``stack`` first; a stdio server is started with ``ROOST_MCP_SERVER=marker`` (see
    ``_process``) and its stderr going to ``errlog``."""
    if config.transport == "http":
        assert config.url is not None
        notes.note(f"connecting to {config.url} (attempt {attempt})")
        client = await stack.enter_async_context(httpx2.AsyncClient(headers=dict(config.headers), timeout=_HTTP_TIMEOUT))
        return streamable_http_client(config.url, http_client=client)
    assert config.command is not None and marker is not None
    params = StdioServerParameters(
        command=config.command, args=list(config.args), env={**config.env, MARKER: marker}, cwd=config.cwd
    )
    notes.note(f"starting {' '.join([config.command, *config.args])} (attempt {attempt})")
    if config.withheld:
        notes.note(
            f"not passed to the server: {', '.join(config.withheld)} (a credential in the value; "
            "[tools.env] pass in your config.toml passes a variable all the same)"
        )
    return stdio_client(params, errlog=errlog)


async def get_prompt(link: ServerLink, server: str, prompt: str, arguments: Mapping[str, str], timeout: float) -> Any:
    """The server's ``GetPromptResult`` for ``prompt`` (its own name) with ``arguments``
    (``server``: the caller's name for the server).

    Raises:
        McpRequestError: the server is not ready, answered with an error or took too long.
    """
    return await _request(link, server, f"prompt {prompt}", timeout, lambda s: s.get_prompt(prompt, dict(arguments)))


async def read_resource(link: ServerLink, server: str, uri: str, timeout: float) -> Any:
    """The server's ``ReadResourceResult`` for ``uri``.

    Raises:
        McpRequestError: as :func:`get_prompt`.
    """
    return await _request(link, server, f"resource {uri}", timeout, lambda s: s.read_resource(uri))


async def _request(link: ServerLink, server: str, what: str, timeout: float, send: Callable[[ClientSession], Any]) -> Any:
    """One request through ``link``'s session once the server is ready, within ``timeout``
    (``server``: the caller's name for it).

    Raises:
        McpRequestError: the server is not ready, answered with an error or took too long.
    """
    with trio.move_on_after(timeout):
        while link.state == "starting":
            await link.wait_changed()
        session = link.session
        if link.state != "ready" or session is None:
            raise McpRequestError(_unavailable(server, link.state, link.error))
        try:
            return await send(session)
        except MCPError as exc:
            raise McpRequestError(f"MCP server {server}: {what}: MCP error {exc.code}: {exc.message}") from None
        except Exception as exc:  # a malformed answer
            log.exception("MCP %s of %s failed", what, server)
            raise McpRequestError(f"MCP server {server}: {what} failed: {type(exc).__name__}: {exc}") from None
    raise McpRequestError(f"MCP server {server}: {what}: no answer within {timeout:g} s")


async def _every_page(session: ClientSession, kind: str) -> list[Any]:
    """The server's whole list of ``kind`` (tools, prompts or resources), page by page."""
    listing = {"tools": session.list_tools, "prompts": session.list_prompts, "resources": session.list_resources}[kind]
    listed: list[Any] = []
    cursor: str | None = None
    while True:
        page: Any = await listing(params=mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None)
        listed += getattr(page, kind)
        cursor = page.next_cursor
        if not cursor:
            return listed


# -- what a failure says ---------------------------------------------------------------------


def _start_error(config: McpServerConfig, group: BaseExceptionGroup[Exception]) -> str:
    """Why an attempt failed, from what ended it."""
    first = _leaves(group)[0]
    if isinstance(first, OSError) and config.transport == "stdio" and first.filename is not None:
        return f"cannot start {config.command!r}: {first.strerror} ({first.filename})"
    if isinstance(first, MCPError):
        if first.code == mcp_types.CONNECTION_CLOSED:
            return "the server closed the connection before it was ready (it exited, or closed its output)"
        return f"MCP error {first.code}: {first.message}"
    return f"{type(first).__name__}: {first}"


def _unavailable(server: str, state: State, error: str | None) -> str:
    """A call's error result while the server is not ready."""
    why = f": {error}" if error else ""
    if state == "failed":
        return (f"MCP server {server} is not available (it failed to start{why}); "
                "it is retried in the background")
    return f"MCP server {server} is {state}{why}"


def _call_error(server: str, shown: str, exc: MCPError) -> str:
    """A call's error result when the server answered it with an error (or the call was lost)."""
    if exc.code == mcp_types.CONNECTION_CLOSED:
        return (f"{shown}: the connection to MCP server {server} was lost during the call; "
                "it is being restarted, try again shortly")
    return f"{shown}: MCP error {exc.code}: {exc.message}"


def _leaves(group: BaseExceptionGroup[Exception]) -> list[Exception]:
    found: list[Exception] = []
    for exc in group.exceptions:
        found += _leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return found
