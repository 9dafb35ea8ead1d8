"""What the method table's parts share: each part answers the methods of one noun (sessions,
runs, a folder), and all of them find sessions, read folders and refuse new work while the
daemon stops in the same way, through :class:`ApiPart`.

A handler never calls another handler: what two of them do alike is a helper here (or in the
part that alone uses it).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Iterator, Mapping

import trio

from roost.protocol import ErrorCode, RpcError

from ..folder._config import ConfigError
from ..folder._setup import FolderSetup
from ..providers import ProviderUnavailable
from ..runs._conductor import Conductor
from ..runs._command_lines import LinesNeedApproval
from ..runs._plan import PlanError
from ..runs._sessions import Session, SessionNotFound
from ._connection import Connection

#: A method's handler: the connection it came on and its checked params, to its result.
Handler = Callable[[Connection, dict[str, Any]], Awaitable[Any]]


class ApiPart:
    """The handlers of one noun, with what every part uses.

    A part lists its handlers in ``table()``: method name to bound method, the one way a
    handler is registered (:class:`~roost.daemon.rpc._api.Api` joins the parts' tables).
    """

    def __init__(self, conductor: Conductor, shutdown: trio.Event) -> None:
        self.conductor = conductor
        self._shutdown = shutdown

    async def _folder(self, cwd: str, environ: Mapping[str, str]) -> FolderSetup:
        try:
            return await self.conductor.planner.load_folder(cwd, environ)
        except ConfigError as exc:
            raise RpcError(ErrorCode.CONFIG_INVALID, str(exc)) from None

    async def _session(self, session_id: str) -> Session:
        try:
            return await self.conductor.sessions.get(session_id)
        except SessionNotFound:
            raise no_session(session_id) from None

    async def _attach(self, connection: Connection, session_id: str, since: int) -> int:
        """Send the session's events after ``since`` to ``connection``, then its new ones as
        they come; the session's last seq."""
        if not self.conductor.sessions.stored_only(session_id):
            # Loaded (or settled) first: a run that seems to go on is never replayed.
            await self._session(session_id)
        return await self.conductor.fanout.attach(connection, session_id, since)

    def _refuse_when_stopping(self) -> None:
        if self._shutdown.is_set():
            raise RpcError(ErrorCode.SHUTTING_DOWN, "the daemon is shutting down")


def no_session(session_id: str) -> RpcError:
    """The error of a request naming a session there is not."""
    return RpcError(ErrorCode.SESSION_NOT_FOUND, f"no session {session_id!r}")


@contextmanager
def planning() -> Iterator[None]:
    """A run that cannot be prepared is the client's to fix: each reason its own code."""
    try:
        yield
    except ConfigError as exc:
        raise RpcError(ErrorCode.CONFIG_INVALID, str(exc)) from None
    except LinesNeedApproval as exc:
        raise RpcError(ErrorCode.APPROVAL_NEEDED, str(exc), {"lines": list(exc.lines)}) from None
    except PlanError as exc:
        raise RpcError(ErrorCode.INVALID_PARAMS, str(exc)) from None
    except ProviderUnavailable as exc:
        raise RpcError(ErrorCode.MODEL_UNAVAILABLE, exc.message) from None


def client_environ(params: Mapping[str, Any]) -> dict[str, str]:
    """The client's environment (``env``), else the daemon's own."""
    env = params.get("env")
    if env is None:
        return dict(os.environ)
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise RpcError(ErrorCode.INVALID_PARAMS, "env must map variable names to strings")
    return env


def checked_cwd(cwd: str | None) -> str:
    """The folder a request names (``~`` expanded, absolute), else the daemon's own
    (INVALID_PARAMS if it is not a folder)."""
    path = os.path.abspath(os.path.expanduser(cwd)) if cwd else os.getcwd()
    if not os.path.isdir(path):
        raise RpcError(ErrorCode.INVALID_PARAMS, f"cwd {path!r} is not a folder")
    return path
