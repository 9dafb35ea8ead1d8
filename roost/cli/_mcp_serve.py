"""``roost mcp serve``: roost as an MCP server on stdin/stdout (or streamable HTTP on a
loopback port, behind a bearer token, or on a Unix socket only the user can reach), so
that another agent (Claude Code: ``claude mcp add roost -- roost mcp serve``; Codex) can
hand it work.

It is one more client of the daemon: each tool call connects to the daemon's socket, as
every command does. The tools:

- ``roost_dispatch``: run a task in a folder and wait for its end (or ``timeout``): the
  final text, how the run ended, its session and run ids;
- ``roost_start``: start one and return at once; ``roost_status`` polls it;
- ``roost_sessions``: the sessions, with their titles;
- ``roost_report``: a run's report (times, tokens, cost, tools, approvals).

Rules and trust stay the user's. The calling agent names a task, a folder, an agent, a
model, and ``plan`` or ``agent`` mode; never rules, ``--yes``, a mode without approvals, or
trust. A call the run must ask about waits for the user's own clients (``roost approve``,
the shell, any attached terminal); the calling agent is told that the run waits, and the
command that answers it.

The MCP SDK (and its asyncio stack) is imported only here: this module is imported only
when the command runs.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import inspect
import json
import os
import secrets
import socket as stdsocket
import sys
import tempfile
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from roost.protocol import RoostError, RpcError
from roost.protocol.asyncio_client import AsyncClient

#: The modes a calling agent may ask for: the ones in which calls ask the user.
MODES = ("agent", "plan")
#: Seconds ``roost_dispatch`` waits for a run by default.
DISPATCH_WAIT = 600.0

_INSTRUCTIONS = (
    "roost runs coding agents in the user's roost daemon. roost_dispatch runs a task in a "
    "folder and waits for its result; roost_start starts one and roost_status polls it. A "
    "tool call the run needs approved waits for the user: say so and give them the command."
)


def serve(socket: str, *, port: int | None = None, unix: str | None = None, token_file: str | None = None) -> None:
    """Serve the tools on stdin/stdout until the client closes them; or over streamable HTTP
    on 127.0.0.1:``port`` (a bearer token required: see :func:`_token`) or on the Unix
    socket ``unix`` (made 0600), until interrupted."""
    from mcp.server.mcpserver import MCPServer

    server: Any = MCPServer("roost", instructions=_INSTRUCTIONS)
    tools = _Tools(socket)
    for tool in (tools.roost_dispatch, tools.roost_start, tools.roost_status, tools.roost_sessions, tools.roost_report):
        server.tool(name=tool.__name__, description=inspect.cleandoc(tool.__doc__ or ""))(_said(tool))
    if port is None and unix is None:
        server.run("stdio")
        return
    import uvicorn

    app = server.streamable_http_app(host="127.0.0.1")
    if port is not None:
        token, where = _token(token_file)
        app = _Bearer(app, token)
        print(f"roost mcp serve: http://127.0.0.1:{port}/mcp (bearer token in {where})", file=sys.stderr, flush=True)
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    else:
        assert unix is not None
        # Bound here, not by uvicorn (which makes a socket everyone may write to): what
        # reaches it runs tasks as this user, so nobody else may connect.
        listener = _private_socket(unix)
        print(f"roost mcp serve: http over {unix} (endpoint /mcp)", file=sys.stderr, flush=True)
        config = uvicorn.Config(app, fd=listener.fileno(), log_level="warning")
    uvicorn.Server(config).run()


def _private_socket(path: str) -> stdsocket.socket:
    """A Unix socket listening at ``path``, mode 0600 from the start."""
    listener = stdsocket.socket(stdsocket.AF_UNIX, stdsocket.SOCK_STREAM)
    previous = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(previous)
    listener.listen(64)
    return listener


def _token(path: str | None) -> tuple[str, str]:
    """The bearer token an HTTP client must send, and the file it is in (0600): read from
    ``path`` when it holds one, else made now and written there (or to a new file in this
    user's runtime folder)."""
    if path is not None and os.path.isfile(path):
        token = open(path, encoding="utf-8").read().strip()
        if len(token) < 16:
            raise SystemExit(f"roost mcp serve: {path} holds no token of at least 16 characters")
        return token, path
    token = secrets.token_urlsafe(32)
    if path is None:
        folder = os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
        fd, path = tempfile.mkstemp(prefix="roost-mcp-", suffix=".token", dir=folder)
    else:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    return token, path


class _Bearer:
    """The app behind a bearer token: an HTTP request without it gets 401 and reaches
    nothing (the app's lifespan passes through)."""

    def __init__(self, app: Any, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": b"a bearer token is required (roost mcp serve printed where it is)\n"})
                return
        await self._app(scope, receive, send)


def _said(tool: Any) -> Any:
    """``tool``, its refusals told to the calling agent as they are (the SDK hides the
    message of any error but its own ToolError)."""

    @functools.wraps(tool)
    async def told(*args: Any, **kwargs: Any) -> Any:
        try:
            return await tool(*args, **kwargs)
        except RpcError as exc:
            raise ToolError(f"{exc.message} [{exc.name}]") from None
        except (ValueError, RoostError) as exc:
            raise ToolError(str(exc)) from None
        except OSError as exc:
            raise ToolError(f"no roost daemon answers at its socket ({exc}): `roost status` says why") from None

    return told


class _Tools:
    """The tools, each one call (or one run) over a connection of its own."""

    def __init__(self, socket: str) -> None:
        self._socket = socket

    async def roost_dispatch(
        self,
        task: str,
        cwd: str,
        agent: str | None = None,
        mode: str = "agent",
        model: str | None = None,
        timeout: float = DISPATCH_WAIT,
    ) -> str:
        """Run TASK in the folder CWD (absolute) through roost and wait for the run's end, up
        to TIMEOUT seconds: its final text and how it ended. MODE is agent (commands and
        writes ask the user) or plan (a plan, nothing run). A run still going when the wait
        ends goes on: roost_status follows it."""
        events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        client = await self._open(events.put_nowait)
        try:
            started = await client.call("dispatch", _params(task, cwd, agent, mode, model, attach=True))
            return await _outcome(client, started, events, timeout)
        finally:
            await client.aclose()

    async def roost_start(
        self, task: str, cwd: str, agent: str | None = None, mode: str = "agent", model: str | None = None
    ) -> str:
        """Start TASK in the folder CWD (absolute) through roost and return at once: the
        session and run ids, for roost_status."""
        client = await self._open(None)
        try:
            started = await client.call("dispatch", _params(task, cwd, agent, mode, model, attach=False))
        finally:
            await client.aclose()
        return json.dumps({"session": started["session"], "run": started["run"], "state": "running"})

    async def roost_status(self, session: str) -> str:
        """How SESSION's last run stands: running, waiting for the user (with the command that
        answers), or ended (with its final text)."""
        client = await self._open(None)
        try:
            return json.dumps(await _status(client, session))
        finally:
            await client.aclose()

    async def roost_sessions(self) -> str:
        """The user's roost sessions: id, title (the first task), status, folder, last activity."""
        client = await self._open(None)
        try:
            rows = (await client.call("sessions.list"))["sessions"]
        finally:
            await client.aclose()
        keys = ("id", "title", "status", "cwd", "last_active")
        return json.dumps([{key: row.get(key) for key in keys} for row in rows])

    async def roost_report(self, run: str) -> str:
        """The report of RUN (a run id, or a session id for its last run): steps, model and
        tool time, tokens, cost, approvals."""
        client = await self._open(None)
        try:
            key = "run" if run.startswith("r") else "session"
            return json.dumps(await client.call("report", {key: run}))
        finally:
            await client.aclose()

    async def _open(self, on_event: Any) -> AsyncClient:
        return await AsyncClient.open(
            self._socket, client="roost-mcp", on_notification=on_event or (lambda _: None), timeout=None
        )


def _params(task: str, cwd: str, agent: str | None, mode: str, model: str | None, *, attach: bool) -> dict[str, Any]:
    """A dispatch's params, as the calling agent may give them (see the module docstring)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}: what runs without asking is the user's to say")
    if not os.path.isabs(cwd):
        raise ValueError(f"cwd must be an absolute folder, not {cwd!r}")
    params: dict[str, Any] = {"task": task, "cwd": cwd, "mode": mode, "attach": attach, "env": dict(os.environ)}
    for key, value in (("agent", agent), ("model", model)):
        if value:
            params[key] = value
    return params


async def _outcome(client: AsyncClient, started: dict[str, Any], events: asyncio.Queue[dict[str, Any]], timeout: float) -> str:
    """The run's end as the calling agent reads it, or where it stands after ``timeout``."""
    run = started["run"]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0.0, timeout)
    while True:
        try:
            event = await asyncio.wait_for(events.get(), max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError:
            state = await _status(client, started["session"])
            return json.dumps({**state, "note": f"still going after {timeout:g} s; roost_status follows it"})
        if event.get("run") != run:
            continue
        if event.get("type") == "run.finished" and not event.get("path"):
            return json.dumps(_ended(started["session"], event))
        if event.get("type") in ("permission.requested", "human.asked"):
            # The user answers, with their own clients; the calling agent is told how.
            state = await _status(client, started["session"])
            return json.dumps({**state, "run": run, "note": "the run waits for the user; roost_status follows it"})


async def _status(client: AsyncClient, session: str) -> dict[str, Any]:
    try:
        rows = {row["id"]: row for row in (await client.call("sessions.list"))["sessions"]}
    except RpcError as exc:
        return {"session": session, "error": exc.message}
    row = rows.get(session)
    if row is None:
        return {"session": session, "error": f"no session {session}"}
    waiting = (await client.call("pending", session=session))["pending"]
    if waiting:
        return {
            "session": session,
            "state": "waiting for the user",
            "requests": [
                {"what": request.get("question") or f"{request.get('name') or request.get('tool')} {json.dumps(request.get('input'))}",
                 "answer_with": f"roost approve {session} {request['call_id']}" if request.get("kind") != "human"
                 else f'roost answer {session} {request["call_id"]} "..."'}
                for request in waiting
            ],
        }
    if row["status"] == "running":
        return {"session": session, "state": "running"}
    events = (await client.call("events", session=session))["events"]
    finished = next((e for e in reversed(events) if e.get("type") == "run.finished" and not e.get("path")), None)
    return _ended(session, finished) if finished else {"session": session, "state": row["status"]}


def _ended(session: str, event: dict[str, Any]) -> dict[str, Any]:
    out = {"session": session, "run": event.get("run"), "state": "ended", "reason": event.get("reason"), "text": event.get("text", "")}
    if event.get("error"):
        out["error"] = event["error"]
    return out
