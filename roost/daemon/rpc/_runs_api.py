"""The runs' methods: dispatch (a task, or a custom command, to a session), steer, abort,
permission.respond, human.respond, pending, compact; and chat (one model call, no session)."""

from __future__ import annotations

import logging
import math
import secrets
import time
from typing import Any, Mapping

import trio

from roost.loop import (
    APPROVAL_SCOPES,
    REASONING_DELTA,
    TEXT_DELTA,
    HumanAnswered,
    InvalidInput,
    PermissionDecided,
    Phase,
    cost,
    safe_text,
)
from roost.protocol import DISPATCH_IMAGE_BYTES, ErrorCode, Notification, RpcError, encode

from ..folder._config import Config, price_map
from ..providers import (
    MAX_TOKENS,
    ModelRequest,
    ProviderError,
    ProviderUnavailable,
    Resolved,
    ToolSpec,
)
from ..runs._plan import Compaction, Dispatch
from ..runs._sessions import Session, SessionBusy
from ..runs._settings import (
    UNSET,
    Asked,
    SettingsError,
)
from ..runs._tool_calls import PromptBlocked
from ..storage._store import StoreError
from ..tools._media import Media, MediaError, image_media, kilobytes
from ._api_part import ApiPart, Handler, checked_cwd, client_environ, planning
from ._connection import Connection

log = logging.getLogger(__name__)


class RunsApi(ApiPart):
    """Answers the methods that start, steer, answer and end runs."""

    def table(self) -> dict[str, Handler]:
        """This part's methods and their handlers."""
        return {
            "dispatch": self.dispatch,
            "steer": self.steer,
            "abort": self.abort,
            "permission.respond": self.permission_respond,
            "human.respond": self.human_respond,
            "pending": self.pending,
            "compact": self.compact,
            "chat": self.chat,
        }

    async def dispatch(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        self._refuse_when_stopping()
        request_id = params.get("request_id")
        if request_id:
            earlier = self.conductor.find_request(request_id)
            if earlier is not None:
                return {"session": earlier[0], "run": earlier[1], "repeated": True}
        if not params["task"].strip():
            raise RpcError(ErrorCode.INVALID_PARAMS, "task is empty")
        asked = _asked(params)
        if params.get("session"):
            session = await self._session(params["session"])
            if session.state.phase is not Phase.IDLE:
                raise _busy(session)
            cwd = session.state.cwd
        else:
            session = None
            cwd = checked_cwd(params.get("cwd"))
        images = await _images(params.get("images") or [])
        with planning():
            plan = await self.conductor.planner.dispatch(
                Dispatch(
                    cwd,
                    params["task"],
                    asked,
                    client_environ(params),
                    request_id,
                    params.get("append_system_prompt") or "",
                    _approved_lines(params.get("approved_lines") or []),
                    params.get("mcp_servers") or {},
                    images,
                )
            )
        fresh = session is None
        if session is None:
            session = await self.conductor.sessions.create(cwd)
        try:
            with session.claim():
                if params.get("attach"):
                    # Attached before the run starts, so no event of it is missed; a new
                    # session's stream starts with its session.created.
                    since = session.state.last_seq if params.get("session") else 0
                    await self._attach(connection, session.id, since)
                run = await self.conductor.start_run(session, plan)
        except SessionBusy:
            raise _busy(session) from None
        except PromptBlocked as exc:
            raise _blocked("task", exc) from None
        except StoreError:
            if fresh:
                # The session was made for this run alone: it goes with it (if the disk
                # lets even a delete through; else prune finds it later).
                with trio.CancelScope(shield=True):
                    await self._forget_new(session)
            raise
        warnings = [*(plan.setup.config.warnings if plan.setup is not None else ()), *plan.warnings]
        return {"session": session.id, "run": run, "model": plan.settings.model, "warnings": warnings}

    async def _forget_new(self, session: Session) -> None:
        """Delete a session a refused dispatch made, that holds nothing but its creation."""
        try:
            await self.conductor.sessions.prune(math.inf, only=[session.id])
        except StoreError as exc:
            log.warning("session %s, made for a run that could not start, stays: %s", session.id, exc)

    async def chat(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        self._refuse_when_stopping()
        cwd = checked_cwd(params.get("cwd"))
        environ = client_environ(params)
        setup = await self._folder(cwd, environ)
        model = self._resolve(params.get("model"), setup.config, environ)
        messages = _chat_messages(params["messages"])
        tools = _chat_tools(params.get("tools") or [])
        chat_id = "c" + secrets.token_hex(6)

        def on_delta(kind: str, text: str) -> None:
            # Straight to this connection: a chat belongs to no session and is not stored.
            event = {
                "type": TEXT_DELTA if kind == "text" else REASONING_DELTA,
                "session": None,
                "run": None,
                "chat": chat_id,
                "ts": time.time(),
                "text": safe_text(text),
            }
            connection.queue(encode(Notification("event", [event])))

        think = _asked({"think": params.get("think")}).think
        request = ModelRequest(
            model=model.model,
            system=params.get("system") or "",
            messages=messages,
            tools=tools,
            max_tokens=params.get("max_tokens") or MAX_TOKENS,
            cwd=cwd,
            think=None if think is UNSET else think,
        )
        started = time.monotonic()
        try:
            reply = await model.provider.stream(request, on_delta)
        except ProviderError as exc:
            raise RpcError(ErrorCode.MODEL_FAILED, exc.message, {"chat": chat_id}) from None
        usage = dict(reply.usage)
        return {
            "chat": chat_id,
            "model": model.model_id,
            "content": [dict(b) for b in reply.content],
            "stop_reason": reply.stop_reason,
            "usage": usage,
            "latency": time.monotonic() - started,
            "cost": cost(usage, price_map(model.price)),
        }

    def _resolve(self, model: str | None, config: Config, environ: Mapping[str, str]) -> Resolved:
        try:
            return self.conductor.planner.providers.resolve(model, config, environ)
        except ProviderUnavailable as exc:
            raise RpcError(ErrorCode.MODEL_UNAVAILABLE, exc.message) from None

    async def steer(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        session = await self._session(params["session"])
        if not params["text"].strip():
            raise RpcError(ErrorCode.INVALID_PARAMS, "text is empty")
        images = await _images(params.get("images") or [])
        try:
            await self.conductor.steer(session, params["text"], [image for _, image in images])
        except InvalidInput:
            raise _not_running(session) from None
        except PromptBlocked as exc:
            raise _blocked("steering", exc) from None
        return {"ok": True}

    async def abort(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        session = await self._session(params["session"])
        after_step = bool(params.get("after_step"))
        reason = "stopped by the user after the step" if after_step else "aborted by the user"
        try:
            run = await self.conductor.abort(session, reason, after_step=after_step)
        except InvalidInput:
            raise _not_running(session) from None
        return {"ok": True, "run": run}

    async def permission_respond(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        session = await self._session(params["session"])
        decision, scope = params["decision"], params.get("scope") or "once"
        if decision not in ("approve", "deny") or scope not in APPROVAL_SCOPES:
            raise RpcError(ErrorCode.INVALID_PARAMS, f"decision is approve or deny; scope is {', '.join(APPROVAL_SCOPES)}")
        answer = PermissionDecided(
            params["call_id"],
            decision == "approve",
            time.time(),
            scope=scope,
            reason=params.get("reason") or "",
            client=_client_name(connection),
        )
        await self._respond(session, answer)
        return {"ok": True}

    async def human_respond(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        session = await self._session(params["session"])
        answer = HumanAnswered(params["call_id"], params["answer"], time.time(), _client_name(connection))
        await self._respond(session, answer)
        return {"ok": True}

    async def _respond(self, session: Session, answer: PermissionDecided | HumanAnswered) -> None:
        try:
            await self.conductor.respond(session, answer)
        except InvalidInput:
            raise RpcError(
                ErrorCode.NOT_PENDING, await self._why_not_pending(session, answer.call_id), {"call_id": answer.call_id}
            ) from None

    async def _why_not_pending(self, session: Session, call_id: str) -> str:
        for event in reversed(await self.conductor.store.events(session.id)):
            if event.data.get("call_id") != call_id:
                continue
            if event.type == "permission.resolved":
                return f"call {call_id} was already answered: {event.data['decision']} by {event.data.get('client')}"
            if event.type == "human.answered":
                return f"call {call_id} was already answered by {event.data.get('client')}"
        return f"session {session.id} has no open request for call {call_id!r}"

    async def pending(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        if params.get("session"):
            sessions = [await self._session(params["session"])]
        else:
            sessions = self.conductor.sessions.loaded()
        out = [row for session in sessions for row in session.pending()]
        return {"pending": out}

    async def compact(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        self._refuse_when_stopping()
        session = await self._session(params["session"])
        if session.state.run is not None:
            raise _busy(session)
        model = params.get("model") or session.state.last_model
        request = Compaction(
            session.state.cwd, model, params.get("keep_turns"), client_environ(params), params.get("instructions") or ""
        )
        with planning():
            plan = await self.conductor.planner.compaction(request)
        try:
            with session.claim():
                if params.get("attach"):
                    await self._attach(connection, session.id, session.state.last_seq)
                run = await self.conductor.start_run(session, plan)
        except SessionBusy:
            raise _busy(session) from None
        return {"session": session.id, "run": run}


def _asked(params: Mapping[str, Any]) -> Asked:
    try:
        return Asked.from_params(params)
    except SettingsError as exc:
        raise RpcError(ErrorCode.INVALID_PARAMS, str(exc)) from None


def _client_name(connection: Connection) -> str:
    """How an answer is attributed: the name the client gave in ``hello``, and its number."""
    return f"{connection.client}#{connection.id}"


def _chat_messages(raw: list[Any]) -> tuple[dict[str, Any], ...]:
    messages = []
    for i, message in enumerate(raw):
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise RpcError(ErrorCode.INVALID_PARAMS, f"chat: messages[{i}] needs role user or assistant")
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list) or not all(isinstance(b, dict) and "type" in b for b in content):
            raise RpcError(ErrorCode.INVALID_PARAMS, f"chat: messages[{i}].content must be a string or blocks")
        messages.append({"role": message["role"], "content": content})
    if not messages or messages[-1]["role"] != "user":
        raise RpcError(ErrorCode.INVALID_PARAMS, "chat: messages must end with a user message")
    return tuple(messages)


def _chat_tools(raw: list[Any]) -> tuple[ToolSpec, ...]:
    tools = []
    for i, tool in enumerate(raw):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
            raise RpcError(ErrorCode.INVALID_PARAMS, f"chat: tools[{i}] needs a name")
        schema = tool.get("input_schema", {"type": "object"})
        tools.append(ToolSpec(tool["name"], str(tool.get("description", "")), schema))
    return tuple(tools)


def _busy(session: Session) -> RpcError:
    run = session.state.run.id if session.state.run else None
    # Between the lock being taken and run.started being stored, the run has no id yet.
    which = f"run {run} is in flight" if run else "a run is starting"
    return RpcError(ErrorCode.SESSION_BUSY, f"session {session.id}: {which}; steer it or abort it", {"run": run})


def _blocked(what: str, exc: PromptBlocked) -> RpcError:
    return RpcError(ErrorCode.PROMPT_BLOCKED, f"a UserPromptSubmit hook refused the {what}: {exc}")


def _not_running(session: Session) -> RpcError:
    return RpcError(ErrorCode.NOT_RUNNING, f"session {session.id} has no run in flight")


def _approved_lines(lines: list[Any]) -> tuple[str, ...]:
    if not all(isinstance(line, str) for line in lines):
        raise RpcError(ErrorCode.INVALID_PARAMS, "approved_lines must be a list of the lines as written")
    return tuple(lines)


async def _images(raw: list[Any]) -> tuple[tuple[str, Media], ...]:
    """A dispatch's images, each checked (and scaled down when large) off the event loop,
    with the name the client gave it."""
    if not all(isinstance(i, dict) and isinstance(i.get("name"), str) and isinstance(i.get("data"), bytes) for i in raw):
        raise RpcError(ErrorCode.INVALID_PARAMS, "images must be a list of {name, data: bytes}")
    total = sum(len(i["data"]) for i in raw)
    if total > DISPATCH_IMAGE_BYTES:
        raise RpcError(
            ErrorCode.INVALID_PARAMS,
            f"the images are {kilobytes(total)} in all, over the {kilobytes(DISPATCH_IMAGE_BYTES)} a dispatch carries",
        )
    images = []
    for image in raw:
        try:
            images.append((image["name"], await trio.to_thread.run_sync(image_media, image["data"])))
        except MediaError as exc:
            raise RpcError(ErrorCode.INVALID_PARAMS, f"image {image['name']}: {exc}") from None
    return tuple(images)
