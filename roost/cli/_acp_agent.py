"""The agent of ``roost acp``: an Agent Client Protocol agent on stdin/stdout, so that editors (Zed,
JetBrains IDEs, Neovim and Emacs plugins) drive roost as they drive other agents.

It is one more client of the daemon: an ACP session is a roost session, so the editor's
session and a terminal's ``roost attach`` are the same live session (either side can
approve, and a run goes on when the editor closes). Built on the maintained Python SDK
(``agent-client-protocol``), imported only when the command runs.

What maps to what:

- ``session/new`` makes a roost session in ``cwd``; ``session/load`` replays any roost
  session's history as updates; ``session/list`` lists them (with their titles).
- ``session/prompt`` is a dispatch; its events become ``session/update`` notifications:
  text and reasoning as message and thought chunks, each tool call as a ``tool_call``
  (its kind, the path it touches, its input) and a ``tool_call_update`` when it ends (its
  output, the diff an edit made), the ``todo`` list as a plan. The prompt's answer is the
  run's end as a stop reason (``end_turn``, ``max_tokens``, ``max_turn_requests``,
  ``refusal``, ``cancelled``).
- A call the run asks about is ``session/request_permission`` with roost's options: once,
  for the session (when the request offers rules), deny. An answer given elsewhere first
  wins: the prompt stops waiting for the editor's, which the daemon would refuse (ACP has
  no way to withdraw a question, so the editor may still show it).
- The folder's custom commands and skills are announced as available commands (typed as
  ``/name``, which the daemon expands as for any dispatch).
- ``session/cancel`` aborts the run; ``session/set_mode`` picks plan, agent, full or exec
  for the next prompts (the editor is the user's own client, like the shell).

- The editor's MCP servers (``mcpServers`` of ``session/new`` and ``session/load``, over
  stdio or HTTP) are brought to each of the session's runs (the dispatch's
  ``mcp_servers``): the user's own, as their config is. SSE servers, which roost does not
  speak, are left out (the capabilities say so).
- Images in a prompt go with the task (``dispatch``'s ``images``).

Not yet: ``authenticate`` is not needed (keys come from the environment the editor starts
roost with).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import os
from typing import Any

import acp
from acp import schema

import roost
from roost.protocol import RpcError
from roost.protocol.asyncio_client import AsyncClient

from ._render import searched

log = logging.getLogger(__name__)

#: roost's modes, as the editor offers them.
MODES = (
    ("agent", "Agent", "Writes and commands ask first"),
    ("plan", "Plan", "One reply, a plan; nothing runs"),
    ("full", "Full", "Nothing asks; deny rules still hold"),
    ("exec", "Exec", "Edit, run the project's check.sh, fix, until it passes"),
)
#: How a run's end reads as ACP's stop reason (other ends: end_turn).
STOP_REASONS: dict[str, schema.StopReason] = {
    "max_tokens": "max_tokens",
    "max_turns": "max_turn_requests",
    "aborted": "cancelled",
    "error": "end_turn",
}
#: ACP's kind of each of roost's tools (others: "other"; MCP tools too).
TOOL_KINDS: dict[str, schema.ToolKind] = {
    "read": "read", "glob": "search", "grep": "search", "write": "edit", "edit": "edit",
    "bash": "execute", "web_fetch": "fetch", "todo": "think", "task": "think",
}


def serve(socket: str) -> None:
    """Serve ACP on stdin/stdout until the editor closes them."""
    # The SDK's Agent protocol lists every method ACP has; the SDK answers the ones an
    # agent leaves out (fork, config options...) with "method not found".
    agent: Any = RoostAgent(socket)
    asyncio.run(acp.run_agent(agent))


class RoostAgent:
    """The ACP agent: each editor request is one or more calls of the daemon."""

    def __init__(self, socket: str) -> None:
        self._socket = socket
        self._conn: Any = None
        #: The mode the editor chose for each session's next prompts.
        self._modes: dict[str, str] = {}
        #: The editor's MCP servers for each session, as a dispatch takes them.
        self._servers: dict[str, dict[str, Any]] = {}
        #: Notifications sent off the requests' way (held: the loop keeps weak references).
        self._tasks: set[asyncio.Task[None]] = set()

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **_: Any) -> schema.InitializeResponse:
        return schema.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=schema.AgentCapabilities(
                load_session=True,
                prompt_capabilities=schema.PromptCapabilities(image=True),
                mcp_capabilities=schema.McpCapabilities(http=True, sse=False),
            ),
            agent_info=schema.Implementation(name="roost", title="roost", version=roost.__version__),
        )

    async def authenticate(self, method_id: str, **_: Any) -> None:
        return None

    async def new_session(self, cwd: str, mcp_servers: Any = None, **_: Any) -> schema.NewSessionResponse:
        async with self._client() as client:
            created = await client.call("sessions.create", cwd=cwd)
        self._servers[created["session"]] = _servers(mcp_servers)
        self._announce_commands(created["session"], cwd)
        return schema.NewSessionResponse(session_id=created["session"], modes=self._mode_state(created["session"]))

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None, **_: Any) -> schema.LoadSessionResponse:
        async with self._client() as client:
            events = (await _checked(client.call("events", session=session_id)))["events"]
        self._servers[session_id] = _servers(mcp_servers)
        replay = _Updates(self._conn, session_id)
        for event in events:
            await replay.show(event, replaying=True)
        self._announce_commands(session_id, cwd)
        return schema.LoadSessionResponse(modes=self._mode_state(session_id))

    async def list_sessions(self, cwd: str | None = None, cursor: str | None = None, **_: Any) -> schema.ListSessionsResponse:
        async with self._client() as client:
            rows = (await client.call("sessions.list"))["sessions"]
        return schema.ListSessionsResponse(
            sessions=[
                schema.SessionInfo(session_id=row["id"], cwd=row["cwd"], title=row.get("title") or None)
                for row in rows
                if cwd is None or row["cwd"] == cwd
            ]
        )

    async def set_session_mode(self, session_id: str, mode_id: str, **_: Any) -> None:
        if mode_id not in {mode for mode, _, _ in MODES}:
            raise acp.RequestError.invalid_params({"modeId": f"one of {', '.join(m for m, _, _ in MODES)}"})
        self._modes[session_id] = mode_id
        await self._conn.session_update(session_id, schema.CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode_id))

    async def prompt(self, session_id: str, prompt: list[Any], **_: Any) -> schema.PromptResponse:
        task, images = _task(prompt)
        events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        async with self._client(events.put_nowait) as client:
            params: dict[str, Any] = {"task": task, "session": session_id, "attach": True, "env": dict(os.environ)}
            if images:
                params["images"] = images
            if session_id in self._modes:
                params["mode"] = self._modes[session_id]
            if self._servers.get(session_id):
                params["mcp_servers"] = self._servers[session_id]
            started = await _checked(client.call("dispatch", params))
            updates = _Updates(self._conn, session_id, client)
            try:
                while True:
                    event = await events.get()
                    if event.get("type") == "run.finished" and event.get("run") == started["run"] and not event.get("path"):
                        return schema.PromptResponse(stop_reason=_stop_reason(event))
                    await updates.show(event)
            finally:
                await updates.close()

    async def cancel(self, session_id: str, **_: Any) -> None:
        async with self._client() as client:
            try:
                await client.call("abort", session=session_id)
            except RpcError:
                pass  # nothing in flight: nothing to cancel

    def _announce_commands(self, session_id: str, cwd: str) -> None:
        """Tell the editor the folder's custom commands and skills (typed as ``/name``),
        once the session it answers for exists on its side."""
        task = asyncio.get_running_loop().create_task(self._commands(session_id, cwd))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _commands(self, session_id: str, cwd: str) -> None:
        try:
            async with self._client() as client:
                listed = await client.call("commands.list", cwd=cwd, env=dict(os.environ))
        except (RpcError, acp.RequestError) as exc:
            log.warning("the commands of %s could not be listed: %s", cwd, exc)
            return
        commands = [
            schema.AvailableCommand(
                name=row.get("short") or row["name"],
                description=row.get("description") or row["name"],
                input=schema.AvailableCommandInput(root=schema.UnstructuredCommandInput(hint=row["argument_hint"]))
                if row.get("argument_hint") else None,
            )
            for row in listed["commands"]
        ]
        update = schema.AvailableCommandsUpdate(session_update="available_commands_update", available_commands=commands)
        await self._conn.session_update(session_id, update)

    def _mode_state(self, session_id: str) -> schema.SessionModeState:
        return schema.SessionModeState(
            current_mode_id=self._modes.get(session_id, "agent"),
            available_modes=[schema.SessionMode(id=mode, name=name, description=doc) for mode, name, doc in MODES],
        )

    def _client(self, on_event: Any = None) -> _Connection:
        return _Connection(self._socket, on_event)


class _Connection:
    """One connection to the daemon for one request (``async with``)."""

    def __init__(self, socket: str, on_event: Any) -> None:
        self._socket = socket
        self._on_event = on_event or (lambda _: None)
        self._client: AsyncClient | None = None

    async def __aenter__(self) -> AsyncClient:
        try:
            self._client = await AsyncClient.open(self._socket, client="roost-acp", on_notification=self._on_event, timeout=None)
        except OSError as exc:
            raise acp.RequestError.internal_error({"reason": f"no roost daemon answers at {self._socket}: {exc}"}) from None
        return self._client

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.aclose()


async def _checked(call: Any) -> Any:
    """A daemon call's answer; its refusal as an ACP error the editor shows."""
    try:
        return await call
    except RpcError as exc:
        raise acp.RequestError.invalid_params({"reason": f"{exc.message} [{exc.name}]"}) from None


def _task(prompt: list[Any]) -> tuple[str, list[dict[str, Any]]]:
    """The prompt's blocks as one task: text as it is, a linked or embedded file by path;
    and its images, as dispatch sends them (the daemon checks them)."""
    parts: list[str] = []
    images: list[dict[str, Any]] = []
    for block in prompt:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "image" and block.data:
            try:
                images.append({"name": f"image {len(images) + 1}", "data": base64.b64decode(block.data)})
            except binascii.Error:
                parts.append("[an image not sent: its data is not base64]")
        elif kind == "resource_link":
            parts.append(f"@{_path(block.uri)}")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(f'<file path="{_path(resource.uri)}">\n{text}\n</file>' if text is not None else f"@{_path(resource.uri)}")
        else:
            parts.append(f"[{kind} not sent: roost takes text, images and files from an editor so far]")
    return "\n".join(parts), images


def _path(uri: str) -> str:
    return uri[len("file://"):] if uri.startswith("file://") else uri


def _stop_reason(event: dict[str, Any]) -> schema.StopReason:
    if "refusal" in str(event.get("error", "")):
        return "refusal"
    return STOP_REASONS.get(str(event.get("reason")), "end_turn")


class _Updates:
    """A session's events as ``session/update`` notifications (and permission requests)."""

    def __init__(self, conn: Any, session: str, client: AsyncClient | None = None) -> None:
        self._conn = conn
        self._session = session
        #: The prompt's connection, which answers what the editor decides (None: a replay).
        self._client = client
        self._streamed = False
        #: Calls the editor was told of, and the questions it is asked now, by call id.
        self._announced: set[str] = set()
        self._asking: dict[str, asyncio.Task[None]] = {}

    async def show(self, event: dict[str, Any], replaying: bool = False) -> None:
        kind = event.get("type")
        if event.get("path"):
            return  # a sub-agent's events: its call shows as one tool call
        updates: list[Any] = []
        if kind == "message.user" and replaying:
            updates.append(acp.update_user_message_text(str(event.get("text", ""))))
        elif kind == "text.delta":
            self._streamed = True
            updates.append(acp.update_agent_message_text(str(event.get("text", ""))))
        elif kind == "reasoning.delta":
            updates.append(acp.update_agent_thought_text(str(event.get("text", ""))))
        elif kind == "message.assistant":
            if not self._streamed:
                text = "".join(b.get("text", "") for b in event.get("content", []) if b.get("type") == "text")
                updates += [acp.update_agent_message_text(text)] if text else []
            self._streamed = False
            updates += _searches(event.get("content", []))
        elif kind == "tool.started":
            updates.append(self._started(event, "in_progress"))
        elif kind == "tool.finished":
            updates += _tool_finished(event)
        elif kind == "permission.requested" and not replaying and self._client is not None:
            updates.append(self._started(event, "pending"))
            self._asking[event["call_id"]] = asyncio.create_task(self._ask(event))
        elif kind == "permission.resolved":
            asking = self._asking.pop(str(event.get("call_id")), None)
            if asking is not None and not asking.done():
                asking.cancel()  # answered elsewhere: the editor's question is moot
        for update in updates:
            await self._conn.session_update(self._session, update)

    async def close(self) -> None:
        """Withdraw the questions still open (the run ended)."""
        for task in self._asking.values():
            task.cancel()
        self._asking.clear()

    def _started(self, event: dict[str, Any], status: schema.ToolCallStatus) -> Any:
        """The call as the editor first sees it, or its new status once announced."""
        call_id = event["call_id"]
        if call_id in self._announced:
            return acp.update_tool_call(call_id, status=status)
        self._announced.add(call_id)
        return _tool_started(event, status)

    async def _ask(self, event: dict[str, Any]) -> None:
        """Ask the editor about a call and send its answer to the daemon (an answer given
        elsewhere first wins: the daemon then refuses this one, which is fine)."""
        options = [schema.PermissionOption(option_id="once", name="Allow once", kind="allow_once")]
        if event.get("session_rules"):
            rules = ", ".join(event["session_rules"])
            options.append(schema.PermissionOption(option_id="session", name=f"Allow for the session: {rules}", kind="allow_always"))
        options.append(schema.PermissionOption(option_id="deny", name="Deny", kind="reject_once"))
        call = schema.ToolCallUpdate(tool_call_id=event["call_id"], title=_title(event), kind=_kind(event), raw_input=event.get("input"))
        answer = await self._conn.request_permission(self._session, call, options)
        chosen = getattr(answer.outcome, "option_id", None)
        params: dict[str, Any] = {"session": self._session, "call_id": event["call_id"]}
        if chosen in ("once", "session"):
            params.update(decision="approve", scope=chosen)
        else:
            params.update(decision="deny", reason="denied in the editor")
        assert self._client is not None
        try:
            await self._client.call("permission.respond", params)
        except RpcError:
            pass  # answered elsewhere first


def _kind(event: dict[str, Any]) -> schema.ToolKind:
    return TOOL_KINDS.get(str(event.get("name") or event.get("tool")), "other")


def _servers(servers: Any) -> dict[str, Any]:
    """The editor's MCP servers in ``.mcp.json``'s shape, as a dispatch takes them (SSE ones
    left out: roost speaks stdio and streamable HTTP)."""
    out: dict[str, Any] = {}
    for server in servers or ():
        if isinstance(server, schema.McpServerStdio):
            out[server.name] = {"command": server.command, "args": list(server.args),
                                "env": {v.name: v.value for v in server.env}}
        elif isinstance(server, schema.HttpMcpServer):
            out[server.name] = {"type": "http", "url": server.url, "headers": {h.name: h.value for h in server.headers}}
        else:
            log.warning("the editor's MCP server %s is not used: roost speaks stdio and HTTP, not SSE",
                        getattr(server, "name", "?"))
    return out


def _title(event: dict[str, Any]) -> str:
    name = str(event.get("name") or event.get("tool") or "tool")
    tool_input = event.get("input") or {}
    detail = tool_input.get("command") or tool_input.get("path") or tool_input.get("url") or tool_input.get("pattern") or ""
    return f"{name} {detail}".strip()


def _tool_started(event: dict[str, Any], status: schema.ToolCallStatus = "in_progress") -> Any:
    tool_input = event.get("input") or {}
    path = tool_input.get("path")
    locations = [schema.ToolCallLocation(path=str(path))] if isinstance(path, str) else None
    return acp.start_tool_call(
        event["call_id"], _title(event), kind=_kind(event), status=status, locations=locations, raw_input=tool_input
    )


def _tool_finished(event: dict[str, Any]) -> list[Any]:
    """A call's end (its output, an edit's diff); the todo list also as the plan."""
    meta = event.get("meta") or {}
    content = [acp.tool_content(acp.text_block(str(event.get("result", ""))))]
    if isinstance(meta.get("diff"), str) and meta["diff"]:
        content.append(acp.tool_content(acp.text_block(meta["diff"])))
    status: schema.ToolCallStatus = "failed" if event.get("is_error") else "completed"
    updates: list[Any] = [acp.update_tool_call(event["call_id"], status=status, content=content, raw_output=event.get("result", ""))]
    if event.get("name") == "todo" and isinstance(meta.get("todos"), list):
        updates.append(acp.update_plan(
            acp.plan_entry(str(todo.get("content", "")), status=_todo_status(todo.get("status")))
            for todo in meta["todos"]
        ))
    return updates


def _searches(content: list[Any]) -> list[Any]:
    """The searches a reply's provider ran, as tool calls: each query, then what it found
    (the sources its text cites are in the text's own words)."""
    updates: list[Any] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "server_tool_use":
            [(_, title)] = searched([block])
            updates.append(acp.start_tool_call(str(block.get("id")), title, kind="fetch", status="in_progress",
                                               raw_input=block.get("input")))
        elif block.get("type") == "web_search_tool_result":
            [(kind, line)] = searched([block])
            status: schema.ToolCallStatus = "failed" if kind == "failed" else "completed"
            updates.append(acp.update_tool_call(str(block.get("tool_use_id")), status=status,
                                                content=[acp.tool_content(acp.text_block(line))]))
    return updates


def _todo_status(status: Any) -> schema.PlanEntryStatus:
    if status == "in_progress":
        return "in_progress"
    return "completed" if status == "completed" else "pending"
