"""The method table: each RPC method's handler, and the checks every request goes through.

Params are checked against the catalogue in :mod:`roost.protocol` (one map, required keys,
types) before a handler runs. The handlers are in parts, one a noun (sessions, runs, a
folder: :mod:`._api_part`); this module joins their tables and answers ``hello``,
``status`` and ``shutdown`` itself. Handlers raise :class:`RpcError` with a stable code; the
store's errors become ``STORE_FULL`` / ``STORE_UNAVAILABLE`` here, once; anything else is a
bug, logged with its traceback, and answered ``INTERNAL`` with no traceback.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from typing import Any, Sequence

import trio

import roost
from roost.loop import EVENT_TYPES
from roost.protocol import (
    API_COMPATIBLE,
    API_LEVEL,
    METHODS,
    METHODS_BY_NAME,
    PROTOCOL_VERSION,
    ErrorCode,
    Request,
    RpcError,
    encode_response,
    error_table,
)

from ..runs._conductor import Conductor
from ..schedules import Scheduler
from ..storage._store import StoreError, StoreFull
from ..folder._config import ConfigError
from ._api_part import Handler, checked_cwd, client_environ, no_session
from ._connection import Connection
from ._folder_api import FolderApi
from ._memory_api import MemoryApi
from ._schedules_api import SchedulesApi
from ._runs_api import RunsApi
from ._sessions_api import SessionsApi

log = logging.getLogger(__name__)

#: Methods whose handlers first find their ``session`` (SESSION_NOT_FOUND if there is none)
#: and do nothing else before: :meth:`Api.refusal` refuses an unknown one for them.
_READ_A_SESSION = frozenset({"events", "attach"})


class Api:
    """Answers requests on behalf of one daemon.

    ``notices`` are what the user should hear of (a damaged database set aside): ``hello``
    and ``status`` carry them.
    """

    def __init__(
        self, conductor: Conductor, socket: str, shutdown: trio.Event, notices: Sequence[str] = (),
        scheduler: Scheduler | None = None,
    ) -> None:
        self.conductor = conductor
        self.socket = socket
        self.notices = notices
        self.started = time.monotonic()
        self._shutdown = shutdown
        tables: list[dict[str, Handler]] = [
            {"hello": self.hello, "status": self.status, "shutdown": self.shutdown},
            SessionsApi(conductor, shutdown).table(),
            RunsApi(conductor, shutdown).table(),
            FolderApi(conductor, shutdown).table(),
            MemoryApi(conductor, shutdown).table(),
            SchedulesApi(conductor, shutdown, scheduler).table(),
        ]
        self._handlers: dict[str, Handler] = {name: h for table in tables for name, h in table.items()}
        assert len(self._handlers) == sum(map(len, tables)), "a method has two handlers"
        assert set(self._handlers) == set(METHODS_BY_NAME), "catalogue and handlers differ"

    def refusal(self, request: Request) -> bytes | None:
        """The error response of a request refused before its handler would run, when that
        is known without waiting: an unknown method, bad params, or no such session for a
        method that reads one (``events``, ``attach``); None: its handler answers it. The
        reader sends these itself (a task per request costs as much as the rest of a round
        trip)."""
        try:
            params = check_params(request)
        except RpcError as exc:
            return encode_response(request.msgid, exc.to_wire(), None)
        if request.method in _READ_A_SESSION and not self.conductor.sessions.known(params["session"]):
            return encode_response(request.msgid, no_session(params["session"]).to_wire(), None)
        return None

    async def answer(self, connection: Connection, request: Request) -> bytes:
        """Run one request and return the encoded response (never raises)."""
        try:
            params = check_params(request)
            result = await self._handlers[request.method](connection, params)
        except RpcError as exc:
            return encode_response(request.msgid, exc.to_wire(), None)
        except StoreError as exc:
            return encode_response(request.msgid, store_refusal(exc).to_wire(), None)
        except Exception:
            log.exception("internal error in %s", request.method)
            error = RpcError(ErrorCode.INTERNAL, f"internal error in {request.method}; see the daemon log")
            return encode_response(request.msgid, error.to_wire(), None)
        return encode_response(request.msgid, None, result)

    async def hello(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        return hello_result(connection, params, self.notices)

    async def status(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        config: dict[str, Any] | None = None
        if params.get("cwd"):
            # The config a dispatch there would read: broken, or with keys it ignores.
            try:
                setup = await self.conductor.planner.load_folder(checked_cwd(params["cwd"]), client_environ(params))
                config = {"files": list(setup.config.files), "warnings": list(setup.config.warnings), "error": None}
            except ConfigError as exc:
                config = {"files": [], "warnings": [], "error": str(exc)}
        return {
            "config": config,
            "pid": os.getpid(),
            "version": roost.__version__,
            "socket": self.socket,
            "uptime": time.monotonic() - self.started,
            "sessions": self.conductor.store.session_count(),
            "runs": self.conductor.sessions.runs_in_flight(),
            "background_commands": len(self.conductor.sessions.background),
            "database": str(self.conductor.store.path),
            "store": {"ok": True},
            "sandbox": self.conductor.planner.sandbox.availability.to_map(),
            "notices": list(self.notices),
        }

    async def shutdown(self, connection: Connection, params: dict[str, Any]) -> dict[str, Any]:
        self._shutdown.set()
        return {"ok": True}


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


def check_params(request: Request) -> dict[str, Any]:
    """The request's one map of params, checked against its method's catalogue entry.

    Raises:
        RpcError: UNKNOWN_METHOD, or INVALID_PARAMS (see :meth:`roost.protocol.Method.check`).
    """
    method = METHODS_BY_NAME.get(request.method)
    if method is None:
        raise RpcError(ErrorCode.UNKNOWN_METHOD, f"no method {request.method!r}")
    return method.check(request.params)
