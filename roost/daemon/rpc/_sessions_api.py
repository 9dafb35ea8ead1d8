"""The sessions' methods: list, create, fork, export, import, prune, gc, attach, detach,
events, report."""

from __future__ import annotations

import logging
import secrets
import time
import weakref
from typing import Any

import trio

from roost.loop import run_report
from roost.protocol import ErrorCode, Packed, RpcError, packed_array, packed_map

from ..runs._conductor import Conductor
from ..runs._session_end import REASONS
from ..runs._sessions import Session
from ..storage._export import PAGE_EVENTS, Importer, ImportRefused, header_line, page
from ..storage._store import SessionRow
from ._api_part import ApiPart, Handler, checked_cwd
from ._connection import Connection

log = logging.getLogger(__name__)


class SessionsApi(ApiPart):
    """Answers the methods on sessions: what is kept, and who follows it."""

    def __init__(self, conductor: Conductor, shutdown: trio.Event) -> None:
        super().__init__(conductor, shutdown)
        #: Imports sent in parts, by connection (they end with it) and upload id.
        self._uploads: weakref.WeakKeyDictionary[Connection, dict[str, Importer]] = weakref.WeakKeyDictionary()

    def table(self) -> dict[str, Handler]:
        """This part's methods and their handlers."""
        return {
            "sessions.list": self.sessions_list,
            "sessions.create": self.sessions_create,
            "sessions.fork": self.sessions_fork,
            "sessions.export": self.sessions_export,
            "sessions.import": self.sessions_import,
            "sessions.prune": self.sessions_prune,
            "gc": self.gc,
            "attach": self.attach,
            "detach": self.detach,
            "events": self.events,
            "report": self.report,
        }

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
                    "title": row.title,
                }
            )
        # A fork with no run of its own goes by the task it was forked from.
        listed = {entry["id"]: entry for entry in out}
        for entry in out:
            source = entry
            while not source["title"] and source["parent"] in listed:
                source = listed[source["parent"]]
            entry["title"] = source["title"]
        return {"sessions": out}

    async def sessions_prune(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        older_than = params["older_than"]
        if older_than < 0:
            raise RpcError(ErrorCode.INVALID_PARAMS, "older_than must not be negative")
        only = params.get("sessions")
        if only is not None and not all(isinstance(s, str) for s in only):
            raise RpcError(ErrorCode.INVALID_PARAMS, "sessions must be a list of session ids")
        dry_run = bool(params.get("dry_run"))
        pruned, kept = await self.conductor.sessions.prune(time.time() - older_than, dry_run=dry_run, only=only)
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
        session = await self.conductor.sessions.create(checked_cwd(params.get("cwd")))
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
        session = await self.conductor.sessions.fork(parent, at)
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
        last_seq = await self._attach(connection, session, params.get("since", 0))
        return {"session": session, "last_seq": last_seq}

    async def detach(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        reason = params.get("reason")
        if reason is not None and reason not in REASONS:
            raise RpcError(ErrorCode.INVALID_PARAMS, f"reason must be one of {', '.join(REASONS)}")
        self.conductor.fanout.detach(connection, params["session"])
        if reason is not None:
            # The session ends for this client, as Claude Code's ends (see _session_end).
            self.conductor.session_ends.left(self.conductor.sessions, params["session"], reason)
        return {"ok": True}

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


def _run_status(session: Session) -> str | None:
    """What the run in flight is doing, in one word (None: no run)."""
    run = session.state.run
    if run is None:
        return None
    return "waiting" if session.waits_for_a_person() else "running"
