"""The method table: each RPC method's handler, and the checks every request goes through.

Params are checked against the catalogue in :mod:`roost.protocol` (one map, required keys,
types) before a handler runs. Handlers raise :class:`RpcError` with a stable code; the
store's errors become ``STORE_FULL`` / ``STORE_UNAVAILABLE`` here, once; anything else is a
bug, logged with its traceback, and answered ``INTERNAL`` with no traceback.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import secrets
import time
import weakref
from dataclasses import replace
from typing import Any, Awaitable, Callable, Mapping, Sequence, TypeVar

import trio

import roost
from roost.loop import (
    EVENT_TYPES,
    REASONING_DELTA,
    TEXT_DELTA,
    HumanAnswered,
    InvalidInput,
    PermissionDecided,
    Phase,
    cost,
    run_report,
    safe_text,
)
from roost.protocol import (
    API_COMPATIBLE,
    API_LEVEL,
    METHODS,
    METHODS_BY_NAME,
    MODES,
    PROTOCOL_VERSION,
    ErrorCode,
    Notification,
    Packed,
    Request,
    Response,
    RpcError,
    encode,
    error_table,
    packed_array,
    packed_map,
)

from ..folder._agents import Agent, unknown_tools
from ..folder._config import Config, ConfigError, price_map
from ..folder._custom_commands import CustomCommand, UnknownCommand, parse_invocation
from ..folder._prompt import compose, render
from ..folder._scripts import unchanged
from ..folder._setup import FolderSetup
from ..folder._trust import TrustError, TrustStore
from ..mcp import UnknownServer
from ..providers import (
    MAX_TOKENS,
    ModelRequest,
    ProviderError,
    ProviderUnavailable,
    Resolved,
    ToolSpec,
)
from ..runs._conductor import Conductor, PromptBlocked
from ..runs._sessions import Session, SessionBusy, SessionNotFound
from ..runs._settings import (
    UNSET,
    Asked,
    RunSettings,
    SettingsError,
    find_agent,
    is_test_model,
    settle,
)
from ..storage._export import PAGE_EVENTS, Importer, ImportRefused, header_line, page
from ..storage._store import SessionRow, StoreError, StoreFull
from ._connection import Connection

log = logging.getLogger(__name__)

Handler = Callable[[Connection, dict[str, Any]], Awaitable[Any]]
_T = TypeVar("_T")




class Api:
    """Answers requests on behalf of one daemon.

    ``notices`` are what the user should hear of (a damaged database set aside): ``hello``
    and ``status`` carry them.
    """

    def __init__(
        self, conductor: Conductor, socket: str, shutdown: trio.Event, notices: Sequence[str] = ()
    ) -> None:
        self.conductor = conductor
        self.socket = socket
        self.notices = notices
        self.started = time.monotonic()
        self._shutdown = shutdown
        #: Imports sent in parts, by connection (they end with it) and upload id.
        self._uploads: weakref.WeakKeyDictionary[Connection, dict[str, Importer]] = weakref.WeakKeyDictionary()
        self._handlers: dict[str, Handler] = {
            "hello": self.hello,
            "status": self.status,
            "shutdown": self.shutdown,
            "sessions.list": self.sessions_list,
            "sessions.create": self.sessions_create,
            "sessions.fork": self.sessions_fork,
            "sessions.export": self.sessions_export,
            "sessions.import": self.sessions_import,
            "sessions.prune": self.sessions_prune,
            "gc": self.gc,
            "attach": self.attach,
            "detach": self.detach,
            "dispatch": self.dispatch,
            "chat": self.chat,
            "providers.list": self.providers_list,
            "steer": self.steer,
            "abort": self.abort,
            "permission.respond": self.permission_respond,
            "human.respond": self.human_respond,
            "pending": self.pending,
            "agents.list": self.agents_list,
            "commands.list": self.commands_list,
            "prompt": self.prompt,
            "compact": self.compact,
            "mcp.list": self.mcp_list,
            "mcp.restart": self.mcp_restart,
            "events": self.events,
            "report": self.report,
            "trust.show": self.trust_show,
            "trust.add": self.trust_add,
            "trust.list": self.trust_list,
            "trust.remove": self.trust_remove,
        }
        assert set(self._handlers) == set(METHODS_BY_NAME), "catalogue and handlers differ"

    async def answer(self, connection: Connection, request: Request) -> bytes:
        """Run one request and return the encoded response (never raises)."""
        try:
            params = check_params(request)
            result = await self._handlers[request.method](connection, params)
        except RpcError as exc:
            return encode(Response(request.msgid, exc.to_wire(), None))
        except StoreError as exc:
            return encode(Response(request.msgid, store_refusal(exc).to_wire(), None))
        except Exception:
            log.exception("internal error in %s", request.method)
            error = RpcError(ErrorCode.INTERNAL, f"internal error in {request.method}; see the daemon log")
            return encode(Response(request.msgid, error.to_wire(), None))
        return encode(Response(request.msgid, None, result))

    async def hello(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return hello_result(connection, params, self.notices)

    async def status(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "pid": os.getpid(),
            "version": roost.__version__,
            "socket": self.socket,
            "uptime": time.monotonic() - self.started,
            "sessions": self.conductor.store.session_count(),
            "runs": self.conductor.runs_in_flight(),
            "database": str(self.conductor.store.path),
            "store": {"ok": True},
            "sandbox": self.conductor.sandbox.availability.to_map(),
            "notices": list(self.notices),
        }

    async def shutdown(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        self._shutdown.set()
        return {"ok": True}

    async def sessions_list(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        loaded = {s.id: s for s in self.conductor.sessions.loaded()}
        out = []
        for row in await self.conductor.store.sessions():
            session = loaded.get(row.id)
            # A run that ended in memory, its end not stored yet (a full disk).
            status = "error" if row.id in self.conductor.sessions.unsettled else row.last_status or "new"
            events = row.events
            clients = 0
            if session is not None:
                status = _run_status(session) or session.state.last_status or "new"
                events = session.state.events
                clients = self.conductor.fanout.count(row.id)
            out.append(
                {
                    "id": row.id,
                    "cwd": row.cwd,
                    "created": row.created,
                    "status": status,
                    "events": events,
                    "clients": clients,
                    "parent": row.parent,
                    "forked_at": row.forked_at,
                    "last_active": row.last_active,
                }
            )
        return {"sessions": out}

    async def sessions_prune(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        older_than = params["older_than"]
        if older_than < 0:
            raise RpcError(ErrorCode.INVALID_PARAMS, "older_than must not be negative")
        only = params.get("sessions")
        if only is not None and not all(isinstance(s, str) for s in only):
            raise RpcError(ErrorCode.INVALID_PARAMS, "sessions must be a list of session ids")
        dry_run = bool(params.get("dry_run"))
        pruned, kept = await self.conductor.prune(time.time() - older_than, dry_run=dry_run, only=only)
        return {
            "sessions": [_pruned(r) for r in pruned],
            "kept": [{**_pruned(r), "why": why} for r, why in kept],
            "dry_run": dry_run,
        }

    async def gc(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        store = self.conductor.store
        blobs, freed = await store.collect_garbage()
        size, free = await store.size()
        log.info("gc: %d blobs nothing referred to, %d bytes", blobs, freed)
        return {"blobs": blobs, "bytes": freed, "database": str(store.path), "database_bytes": size, "free_bytes": free}

    async def sessions_create(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        self._refuse_when_stopping()
        session = await self.conductor.create_session(_cwd(params.get("cwd")))
        return {"session": session.id}

    async def sessions_fork(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        self._refuse_when_stopping()
        parent = await self._session(params["session"])
        last = parent.state.last_seq
        at = params.get("at", last)
        if not 1 <= at <= last:
            raise RpcError(
                ErrorCode.INVALID_PARAMS, f"session {parent.id} has seqs 1 to {last}: there is no seq {at} to fork at"
            )
        session = await self.conductor.fork(parent, at)
        forked_at = self.conductor.store.parent(session.id)
        assert forked_at is not None
        return {
            "session": session.id,
            "parent": parent.id,
            "forked_at": forked_at[1],
            "at": at,
            "last_seq": session.state.last_seq,
            "ended_run": session.state.last_run if session.state.last_seq > forked_at[1] else None,
        }

    async def sessions_export(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        session = await self._session(params["session"])
        since = params.get("since", 0)
        upto = params.get("upto") or session.state.last_seq
        if not 0 <= since < upto <= session.state.last_seq:
            raise RpcError(
                ErrorCode.INVALID_PARAMS,
                f"session {session.id} has seqs 1 to {session.state.last_seq}: cannot export after {since} up to {upto}",
            )
        lines = []
        if since == 0:
            [row] = await self.conductor.store.sessions(only=session.id)
            lines.append(header_line(row, upto))
        events = await self.conductor.store.events(session.id, since, min(PAGE_EVENTS, upto - since))
        more, next_since = page(events, upto)
        return {"session": session.id, "lines": lines + more, "upto": upto, "next": next_since}

    async def sessions_import(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        self._refuse_when_stopping()
        uploads = self._uploads.setdefault(connection, {})
        upload = params.get("upload")
        if upload is None:
            upload = "u" + secrets.token_hex(6)
            uploads[upload] = Importer()
        importer = uploads.get(upload)
        if importer is None:
            raise RpcError(ErrorCode.INVALID_PARAMS, f"no import {upload!r} in progress on this connection")
        try:
            importer.feed(params["lines"])
            if not params.get("done"):
                return {"upload": upload, "lines": importer.lines}
            imported = importer.finish()
        except ImportRefused as exc:
            del uploads[upload]
            raise RpcError(ErrorCode.IMPORT_INVALID, str(exc), {"line": exc.line}) from None
        del uploads[upload]
        meta = imported.session
        session = await self.conductor.sessions.import_session(
            meta["id"], meta["cwd"], meta["created"], imported.events, imported.state
        )
        return {
            "session": session,
            "original": meta["id"],
            "events": self.conductor.store.last_seq(session),
            "lines": importer.lines,
        }

    async def attach(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        session = params["session"]
        if not self.conductor.sessions.stored_only(session):
            # Loaded (or settled) first: a run that seems to go on is never replayed.
            await self._session(session)
        last_seq = await self.conductor.fanout.attach(connection, session, params.get("since", 0))
        return {"session": session, "last_seq": last_seq}

    async def detach(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        self.conductor.fanout.detach(connection, params["session"])
        return {"ok": True}

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
            cwd = _cwd(params.get("cwd"))
        environ = _environ(params)
        setup = await self._folder(cwd, environ)
        task, command = params["task"], None
        invocation = parse_invocation(task)
        if invocation is not None:
            found = _command(setup, invocation[0])
            task = found.expand(invocation[1])
            command = {"name": found.name, "arguments": invocation[1], "source": found.source, "typed": params["task"]}
            if found.model is not None and asked.model is UNSET:
                if found.scope == "project" and is_test_model(found.model):
                    raise RpcError(ErrorCode.INVALID_PARAMS, f"{found.source}: a project's command cannot name {found.model}")
                asked = replace(asked, model=found.model)
        elif task.startswith("//"):
            task = task[1:]
        settings = self._settle(setup, asked, environ)
        fresh = session is None
        if session is None:
            session = await self.conductor.create_session(cwd)
        try:
            with session.claim():
                if params.get("attach"):
                    # Attached before the run starts, so no event of it is missed; a new
                    # session's stream starts with its session.created.
                    since = session.state.last_seq if params.get("session") else 0
                    await self.attach(connection, {"session": session.id, "since": since})
                run = await self.conductor.dispatch(
                    session,
                    settings,
                    setup=setup,
                    environ=environ,
                    task=task,
                    request_id=request_id,
                    command=command,
                )
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
        return {"session": session.id, "run": run, "model": settings.model.model_id}

    async def _forget_new(self, session: Session) -> None:
        """Delete a session a refused dispatch made, that holds nothing but its creation."""
        try:
            await self.conductor.prune(math.inf, only=[session.id])
        except StoreError as exc:
            log.warning("session %s, made for a run that could not start, stays: %s", session.id, exc)

    def _settle(self, setup: FolderSetup, asked: Asked, environ: Mapping[str, str]) -> RunSettings:
        sandbox = self.conductor.sandbox
        try:
            return settle(
                setup,
                asked,
                resolve=lambda model: self._resolve(model, setup.config, environ),
                holds=sandbox.holds,
            )
        except SettingsError as exc:
            raise RpcError(ErrorCode.INVALID_PARAMS, str(exc)) from None

    async def providers_list(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        environ = _environ(params)
        setup = await self._folder(_cwd(params.get("cwd")), environ)
        config = setup.config
        out = []
        for name, entry in sorted(config.providers.items()):
            usable, why = self.conductor.providers.usable(entry, environ)
            out.append(
                {
                    "name": name,
                    "kind": entry.kind,
                    "base_url": entry.base_url,
                    "api_key_env": entry.api_key_env or None,
                    "key_present": bool(entry.api_key(environ)),
                    "usable": usable,
                    "problem": why or None,
                    "models": dict(entry.models),
                    "headers": sorted(entry.headers),
                    "timeout": entry.timeout,
                    "max_retries": entry.max_retries,
                    "source": entry.source,
                }
            )
        return {
            "providers": out,
            "default_model": config.default_model,
            "files": list(config.files),
            "untrusted": setup.untrusted_notice(),
        }

    async def chat(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        self._refuse_when_stopping()
        cwd = _cwd(params.get("cwd"))
        environ = _environ(params)
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
            return self.conductor.providers.resolve(model or config.default_model, config, environ)
        except ProviderUnavailable as exc:
            raise RpcError(ErrorCode.MODEL_UNAVAILABLE, exc.message) from None

    async def _folder(self, cwd: str, environ: Mapping[str, str]) -> FolderSetup:
        try:
            return await self.conductor.load_folder(cwd, environ)
        except ConfigError as exc:
            raise RpcError(ErrorCode.CONFIG_INVALID, str(exc)) from None

    async def steer(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        session = await self._session(params["session"])
        if not params["text"].strip():
            raise RpcError(ErrorCode.INVALID_PARAMS, "text is empty")
        try:
            await self.conductor.steer(session, params["text"])
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
        if decision not in ("approve", "deny") or scope not in ("once", "session"):
            raise RpcError(ErrorCode.INVALID_PARAMS, "decision is approve or deny; scope is once or session")
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
        out = [row for session in sessions for row in self.conductor.pending(session)]
        return {"pending": out}

    async def compact(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        self._refuse_when_stopping()
        session = await self._session(params["session"])
        if session.state.run is not None:
            raise _busy(session)
        environ = _environ(params)
        setup = await self._folder(session.state.cwd, environ)
        model = params.get("model") or session.state.last_model
        settings = self._settle(setup, Asked(model=model or UNSET), environ)
        keep = params.get("keep_turns", settings.keep_turns)
        if keep < 0:
            raise RpcError(ErrorCode.INVALID_PARAMS, "keep_turns must not be negative")
        resolved = settings.model
        try:
            with session.claim():
                if params.get("attach"):
                    await self.attach(connection, {"session": session.id, "since": session.state.last_seq})
                run = await self.conductor.compact(session, resolved, keep)
        except SessionBusy:
            raise _busy(session) from None
        return {"session": session.id, "run": run}

    async def mcp_list(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        setup = await self._folder(_cwd(params.get("cwd")), _environ(params))
        found = setup.mcp_config
        listing = self.conductor.mcp.status(found.servers, found.untrusted) if self.conductor.mcp is not None else []
        return {"servers": listing, "problems": list(found.problems), "untrusted": setup.untrusted_notice()}

    async def mcp_restart(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        self._refuse_when_stopping()
        mcp = self.conductor.mcp
        setup = await self._folder(_cwd(params.get("cwd")), _environ(params))
        servers = setup.mcp
        name = params["name"]
        if mcp is None or name not in servers:
            untrusted = setup.mcp_config.untrusted.get(name)
            if untrusted is not None:
                raise RpcError(
                    ErrorCode.INVALID_PARAMS,
                    f"the MCP server {name!r} ({untrusted.source}) is not trusted: review it with roost trust {setup.root}",
                )
            raise RpcError(ErrorCode.INVALID_PARAMS, f"no MCP server {name!r} is configured here ({', '.join(sorted(servers)) or 'none'})")
        # The server that name is here: another folder's server of that name is not touched.
        mine = {name: servers[name]}
        try:
            await mcp.restart(servers[name])
        except UnknownServer:
            await mcp.ensure(mine)
        [status] = mcp.status(mine)
        return {"ok": status["state"] == "ready", "server": status}

    async def agents_list(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        setup = await self._folder(_cwd(params.get("cwd")), _environ(params))
        found = setup.agents
        tools = self.conductor.tools.names()
        servers = {*setup.mcp, *setup.mcp_config.untrusted}

        def listed(agent: Agent) -> dict[str, Any]:
            model = setup.config.alias(agent.model) if agent.model else None
            unknown = unknown_tools(agent, tools, servers, found.agents)
            return {**agent.describe(), "model_id": model, "unknown_tools": list(unknown)}

        return {
            "agents": [listed(a) for _, a in sorted(found.agents.items())],
            "problems": list(found.problems),
            "untrusted": [item.to_map() for item in found.widening if not item.trusted],
        }

    async def commands_list(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        commands = (await self._folder(_cwd(params.get("cwd")), _environ(params))).commands
        return {"commands": commands.describe(), "problems": list(commands.problems)}

    async def prompt(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        mode = params.get("mode")
        agent_name = params.get("agent")
        summary = ""
        if params.get("session"):
            session = await self._session(params["session"])
            cwd = session.state.cwd
            summary = session.state.summary
            last = session.state.run
            agent_name = agent_name or (last.agent if last else session.state.last_agent)
            mode = mode or (last.mode if last else session.state.last_mode)
        else:
            cwd = _cwd(params.get("cwd"))
        setup = await self._folder(cwd, _environ(params))
        try:
            agent = find_agent(setup, agent_name)
        except SettingsError as exc:
            raise RpcError(ErrorCode.INVALID_PARAMS, str(exc)) from None
        mode = mode or agent.mode or "agent"
        if mode not in MODES:
            raise RpcError(ErrorCode.INVALID_PARAMS, f"mode must be one of {', '.join(MODES)}")
        # The tools a run of the agent would get, as far as the skills layer cares.
        tools = agent.tools if agent.tools is not None else self.conductor.tools.names()
        layers = await compose(agent, mode, setup.place, summary, tools=tools, cache=self.conductor.prompts)
        return {
            "agent": agent.name,
            "mode": mode,
            "layers": [{"name": x.name, "text": x.text, "chars": len(x.text), "source": x.source} for x in layers],
            "text": render(layers),
        }

    async def trust_show(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        setup = await self._folder(_cwd(params["cwd"]), _environ(params))
        trusted = await self._with_trust(lambda store: store.snapshot().has_folder(setup.root))
        return {
            "folder": setup.root,
            "trusted": trusted,
            "current": not setup.ignored,
            "items": [item.to_map() for item in setup.widening],
            "files": _widening_files(setup),
        }

    async def trust_add(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        given = params["files"]
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in given.items()):
            raise RpcError(ErrorCode.INVALID_PARAMS, "trust.add: files must map paths to digests (strings)")
        setup = await self._folder(_cwd(params["cwd"]), _environ(params))
        files = _widening_files(setup)
        if files != given:
            changed = sorted(set(files.items()) ^ set(given.items()))
            names = ", ".join(dict.fromkeys(path for path, _ in changed))
            raise RpcError(
                ErrorCode.TRUST_CHANGED,
                f"what {setup.root} widens changed since it was shown ({names}); nothing was "
                "trusted: look again with roost trust",
                {"folder": setup.root, "files": files},
            )
        await self._with_trust(lambda store: store.add(setup.root, files))
        log.info("trusted %s (%d files)", setup.root, len(files))
        return {"folder": setup.root, "files": files}

    async def trust_list(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return {"folders": await self._with_trust(_trust_listing)}

    async def trust_remove(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        given = os.path.abspath(os.path.expanduser(params["folder"]))

        def remove(store: TrustStore) -> str | None:
            # Recorded as the folder was reached (through a link, say), or as its real path.
            for folder in dict.fromkeys((given, os.path.realpath(given))):
                if store.remove(folder):
                    return folder
            return None

        removed = await self._with_trust(remove)
        if removed:
            log.info("no longer trusted: %s", removed)
        return {"ok": True, "removed": removed is not None, "folder": removed or given}

    async def _with_trust(self, use: Callable[[TrustStore], _T]) -> _T:
        """``use(store)`` in a worker thread; a broken store is CONFIG_INVALID."""
        store = self.conductor.trust
        if store is None:
            raise RpcError(ErrorCode.INVALID_PARAMS, "this daemon keeps no trust store")
        try:
            return await trio.to_thread.run_sync(use, store)
        except TrustError as exc:
            raise RpcError(ErrorCode.CONFIG_INVALID, str(exc)) from None

    async def events(self, connection: Connection, params: dict[str, Any]) -> Packed:
        session = params["session"]
        store = self.conductor.store
        if self.conductor.sessions.stored_only(session):
            last_seq = store.last_seq(session)  # nothing in flight: all of it is stored
        else:
            last_seq = (await self._session(session)).state.last_seq
        events = await store.packed_events(session, params.get("since", 0), params.get("limit"))
        # As stored: a long log is sent without being decoded and encoded again.
        return packed_map({"events": packed_array([body for _, body in events]), "last_seq": last_seq})

    async def report(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        run = params.get("run")
        if params.get("session"):
            session_id = params["session"]
        elif run:
            owner = await self.conductor.store.run_session(run)
            if owner is None:
                raise RpcError(ErrorCode.RUN_NOT_FOUND, f"no run {run!r}")
            session_id = owner
        else:
            raise RpcError(ErrorCode.INVALID_PARAMS, "report: give a session or a run")
        session = await self._session(session_id)
        store = self.conductor.store
        since = 0
        if run is None:
            # The last run's report needs only its own events: a long session is read from
            # where that run started.
            last = session.state.run.id if session.state.run is not None else session.state.last_run
            started = None if last is None else await store.run_started_at(session.id, last)
            since = 0 if started is None else started - 1
        events = await store.events(session.id, since)
        found = run_report(events, run, now=time.time())
        if found is None:
            where = f"no run {run!r} in session {session.id}" if run else f"session {session.id} has had no run yet"
            raise RpcError(ErrorCode.RUN_NOT_FOUND, where)
        return found

    async def _session(self, session_id: str) -> Session:
        try:
            return await self.conductor.sessions.get(session_id)
        except SessionNotFound:
            raise RpcError(ErrorCode.SESSION_NOT_FOUND, f"no session {session_id!r}") from None

    def _refuse_when_stopping(self) -> None:
        if self._shutdown.is_set():
            raise RpcError(ErrorCode.SHUTTING_DOWN, "the daemon is shutting down")


def hello_result(connection: Connection, params: dict[str, Any], notices: Sequence[str]) -> dict[str, Any]:
    """What ``hello`` answers (and the name the client gave, kept on its connection)."""
    protocol = params.get("protocol", PROTOCOL_VERSION)
    if protocol != PROTOCOL_VERSION:
        raise RpcError(
            ErrorCode.UNSUPPORTED_PROTOCOL,
            f"protocol {protocol} is not served; this daemon speaks protocol {PROTOCOL_VERSION}",
        )
    connection.client = str(params.get("client", "unknown"))
    # A command that only calls methods it knows needs none of the catalogue: it is ~18 KiB
    # to decode at every start.
    catalogue = _catalogue() if params.get("catalogue", True) else {}
    return {
        "api_level": API_LEVEL,
        "api_compatible": API_COMPATIBLE,
        "version": roost.__version__,
        "protocol": PROTOCOL_VERSION,
        "pid": os.getpid(),
        # Where a client on another machine resolves "~" and relative folders (--cwd).
        "home": os.path.expanduser("~"),
        **catalogue,
        "notices": list(notices),
    }


@functools.cache
def _catalogue() -> dict[str, Any]:
    # The same for every hello (every CLI command says it): described once. Only packed.
    return {
        "methods": [m.describe() for m in METHODS],
        "events": [{"type": t, "doc": d} for t, d in EVENT_TYPES.items()],
        "errors": error_table(),
    }


def store_refusal(error: StoreError) -> RpcError:
    """A store's error as the error response it is."""
    code = ErrorCode.STORE_FULL if isinstance(error, StoreFull) else ErrorCode.STORE_UNAVAILABLE
    return RpcError(code, str(error), {"database": str(error.path)})


def _pruned(row: SessionRow) -> dict[str, Any]:
    """A session that prune deletes (or keeps), as listed."""
    return {
        "id": row.id,
        "cwd": row.cwd,
        "created": row.created,
        "last_active": row.last_active,
        "events": row.events,
        "status": row.last_status or "new",
        "parent": row.parent,
    }


def _command(setup: FolderSetup, name: str) -> CustomCommand:
    """The custom command ``/name`` of the folder (INVALID_PARAMS, listing them, if none)."""
    try:
        return setup.commands.find(name)
    except UnknownCommand as exc:
        raise RpcError(ErrorCode.INVALID_PARAMS, str(exc)) from None


def _widening_files(setup: FolderSetup) -> dict[str, str]:
    """The files that widen, with the digests of their content as it was read, and the
    project files their entries run."""
    return setup.trust_files


def _trust_listing(store: TrustStore) -> list[dict[str, Any]]:
    """The trusted folders, each file marked current (same content) or changed."""
    out = []
    for record in store.records():
        files = []
        for path, recorded in sorted(record["files"].items()):
            current = unchanged(path, record["folder"], recorded)
            files.append({"path": path, "digest": recorded, "current": current, "missing": not os.path.lexists(path)})
        out.append({**record, "files": files})
    return out


def _asked(params: Mapping[str, Any]) -> Asked:
    try:
        return Asked.from_params(params)
    except SettingsError as exc:
        raise RpcError(ErrorCode.INVALID_PARAMS, str(exc)) from None


def _environ(params: Mapping[str, Any]) -> dict[str, str]:
    """The client's environment (``env``), else the daemon's own."""
    env = params.get("env")
    if env is None:
        return dict(os.environ)
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise RpcError(ErrorCode.INVALID_PARAMS, "env must map variable names to strings")
    return env


def _run_status(session: Session) -> str | None:
    """What the run in flight is doing, in one word (None: no run)."""
    run = session.state.run
    if run is None:
        return None
    return "waiting" if session.waits_for_a_person() else "running"


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


def check_params(request: Request) -> dict[str, Any]:
    """The request's one map of params, checked against its method's catalogue entry.

    Raises:
        RpcError: UNKNOWN_METHOD, or INVALID_PARAMS (see :meth:`roost.protocol.Method.check`).
    """
    method = METHODS_BY_NAME.get(request.method)
    if method is None:
        raise RpcError(ErrorCode.UNKNOWN_METHOD, f"no method {request.method!r}")
    return method.check(request.params)


def _cwd(cwd: str | None) -> str:
    path = os.path.abspath(os.path.expanduser(cwd)) if cwd else os.getcwd()
    if not os.path.isdir(path):
        raise RpcError(ErrorCode.INVALID_PARAMS, f"cwd {path!r} is not a folder")
    return path


def _busy(session: Session) -> RpcError:
    run = session.state.run.id if session.state.run else None
    # Between the lock being taken and run.started being stored, the run has no id yet.
    which = f"run {run} is in flight" if run else "a run is starting"
    return RpcError(ErrorCode.SESSION_BUSY, f"session {session.id}: {which}; steer it or abort it", {"run": run})


def _blocked(what: str, exc: PromptBlocked) -> RpcError:
    return RpcError(ErrorCode.PROMPT_BLOCKED, f"a UserPromptSubmit hook refused the {what}: {exc}")


def _not_running(session: Session) -> RpcError:
    return RpcError(ErrorCode.NOT_RUNNING, f"session {session.id} has no run in flight")
