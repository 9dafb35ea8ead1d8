"""Answering while the database cannot be opened (a full disk at start, an I/O error).

The daemon starts all the same, so that every command hears what is wrong instead of losing
its connection: it listens and answers ``hello``, ``status`` (which says what is wrong) and
``shutdown``, and refuses every other method with the reason (``STORE_FULL`` or
``STORE_UNAVAILABLE``; the message names the file and what to do). Meanwhile the daemon
tries the database again every few seconds, and once it opens serves as usual.
"""

from __future__ import annotations

import os
import time
from typing import Any, Sequence

import trio

import roost
from roost.protocol import Request, Response, RpcError, encode

from ..storage._store import StoreError
from ._api import check_params, hello_result, store_refusal
from ._connection import Connection

#: Seconds between tries to open the database.
RETRY = 2.0


class Unavailable:
    """Answers requests on behalf of a daemon whose database does not open (yet)."""

    def __init__(self, socket: str, error: StoreError, shutdown: trio.Event, notices: Sequence[str] = ()) -> None:
        self.socket = socket
        #: Why the database does not open: updated at every try.
        self.error = error
        self.notices = notices
        self.started = time.monotonic()
        self._shutdown = shutdown

    def refusal(self, request: Request) -> bytes | None:
        """Nothing is refused before :meth:`answer` (which waits for nothing)."""
        return None

    async def answer(self, connection: Connection, request: Request) -> bytes:
        """Run one request and return the encoded response (never raises)."""
        try:
            params = check_params(request)
            result = self._result(connection, request.method, params)
        except RpcError as exc:
            return encode(Response(request.msgid, exc.to_wire(), None))
        return encode(Response(request.msgid, None, result))

    def _result(self, connection: Connection, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "hello":
            return hello_result(connection, params, self.notices)
        if method == "status":
            return {
                "pid": os.getpid(),
                "version": roost.__version__,
                "socket": self.socket,
                "uptime": time.monotonic() - self.started,
                "sessions": 0,
                "runs": 0,
                "background_commands": 0,
                "database": str(self.error.path),
                "store": {"ok": False, "error": str(self.error)},
                "notices": list(self.notices),
            }
        if method == "shutdown":
            self._shutdown.set()
            return {"ok": True}
        refusal = store_refusal(self.error)
        again = f"; the daemon opens it as soon as it can (it tries every {RETRY:g} s)"
        raise RpcError(refusal.code, refusal.message + again, refusal.data)
