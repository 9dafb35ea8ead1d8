"""Stable error codes and the exceptions that carry them.

The codes are part of the wire API: a released code never changes meaning, new ones are
added. Error responses on the wire are maps ``{"code": int, "name": str, "message": str,
"data": any}``; tracebacks never leave the daemon (they go to its log).

Exception tree::

    RoostError                 anything this package raises
    ├── RpcError               an error response from the peer (has .code, .message, .data)
    ├── ProtocolError          the byte stream is not msgpack-RPC (has .code)
    │   └── FrameTooLarge      one message exceeds the maximum frame size
    ├── ConnectionClosed       the peer went away
    │   └── SshFailed          ssh itself failed (exit status 255): unreachable, or refused us
    ├── Timeout                the daemon showed no sign of life for the client's timeout
    └── NotPrivate             the socket's folder, or the process serving it, is not ours
"""

from __future__ import annotations

import enum
from typing import Any


class ErrorCode(enum.IntEnum):
    """Error codes sent in error responses. Values are stable; add, never renumber."""

    #: The bytes are not msgpack, or the message is not a msgpack-RPC message.
    INVALID_MESSAGE = 1
    #: One message is larger than the connection's maximum frame size.
    FRAME_TOO_LARGE = 2
    #: No method of that name.
    UNKNOWN_METHOD = 3
    #: The params are not one map of the documented shape.
    INVALID_PARAMS = 4
    #: The client asked for a protocol version the daemon cannot serve.
    UNSUPPORTED_PROTOCOL = 5
    #: No session with that id.
    SESSION_NOT_FOUND = 10
    #: The session already has a run in flight (use ``steer`` to add to it).
    SESSION_BUSY = 11
    #: The session has no run in flight (for ``steer``, ``abort``).
    NOT_RUNNING = 12
    #: No open permission request or question with that call id (answered, or the run ended).
    NOT_PENDING = 13
    #: No run with that id (in that session), or the session has had no run yet.
    RUN_NOT_FOUND = 14
    #: The model id names no known provider, or the provider cannot be used as configured.
    MODEL_UNAVAILABLE = 20
    #: A config file (user or project) cannot be read; the message names it.
    CONFIG_INVALID = 21
    #: The model call of ``chat`` failed (after the provider's retries).
    MODEL_FAILED = 22
    #: ``trust.add``: a file changed since ``trust.show`` showed it; look again.
    TRUST_CHANGED = 23
    #: The disk holding the daemon's database is full: what the request would have stored
    #: was not (a run in flight was ended). The daemon serves on, and works again once
    #: there is room; the message names the file.
    STORE_FULL = 24
    #: The daemon's database cannot be used (it could not be opened, or it is damaged);
    #: the message names the file and what to do.
    STORE_UNAVAILABLE = 25
    #: A UserPromptSubmit hook refused the task or steering; the message gives its reason.
    PROMPT_BLOCKED = 26
    #: ``sessions.import``: a line of the file is wrong (damaged, cut short, or not a roost
    #: session export); ``data.line`` is its number. Nothing was imported.
    IMPORT_INVALID = 27
    #: ``dispatch``: a custom command's ``!`command``` lines would need a person's approval;
    #: ``data.lines`` are they, as written. Dispatch again with them in ``approved_lines``
    #: once a person approved them.
    APPROVAL_NEEDED = 28
    #: The daemon is shutting down and takes no new work.
    SHUTTING_DOWN = 30
    #: A bug in the daemon; the details are in its log.
    INTERNAL = 99


#: Each code's name, looked up without the enum's call (every error response names its code).
_NAMES = {int(code): code.name for code in ErrorCode}


class RoostError(Exception):
    """Base class of every exception raised by :mod:`roost.protocol`."""


class RpcError(RoostError):
    """An error response: the peer understood the request and refused it."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    @property
    def name(self) -> str:
        """The symbolic name of :attr:`code`, or ``"UNKNOWN"`` for a code we do not know."""
        return _NAMES.get(self.code, "UNKNOWN")

    def to_wire(self) -> dict[str, Any]:
        """The error as the map sent in a response."""
        wire: dict[str, Any] = {"code": int(self.code), "name": self.name, "message": self.message}
        if self.data is not None:
            wire["data"] = self.data
        return wire

    @classmethod
    def from_wire(cls, error: Any) -> RpcError:
        """Build from whatever a peer put in a response's error slot."""
        if isinstance(error, dict):
            code = error.get("code")
            return cls(
                code if isinstance(code, int) else ErrorCode.INTERNAL,
                str(error.get("message", error)),
                error.get("data"),
            )
        return cls(ErrorCode.INTERNAL, str(error))

    def __repr__(self) -> str:
        return f"RpcError({self.name}, {self.message!r})"


class ProtocolError(RoostError):
    """The byte stream broke the protocol; the connection cannot go on."""

    code: int = ErrorCode.INVALID_MESSAGE


class FrameTooLarge(ProtocolError):
    """A message is larger than the maximum frame size."""

    code = ErrorCode.FRAME_TOO_LARGE


class ConnectionClosed(RoostError):
    """The peer closed the connection (or it broke) before the answer came."""


class SshFailed(ConnectionClosed):
    """ssh could not reach the host or log in there (it exited 255 before the handshake);
    the message has its last words. At a terminal, ssh itself may ask for what it lacked
    (a passphrase, a password, a new host key): see :func:`roost.protocol.ssh_argv`."""


class Timeout(RoostError):
    """The daemon stayed silent for the client's whole timeout, even to a ``status`` check.

    The connection is of no further use: close it.
    """


class NotPrivate(RoostError):
    """A folder or socket that must be ours alone is not: a symbolic link, another user's, or
    writable by others; or another user's process serves the socket. The message says
    which, and what to do."""


def error_table() -> list[dict[str, Any]]:
    """Every error code with its name and meaning, as listed by ``hello``."""
    return [
        {"code": int(code), "name": code.name, "doc": _doc(code)} for code in ErrorCode
    ]


def _doc(code: ErrorCode) -> str:
    return _DOCS[code]


_DOCS = {
    ErrorCode.INVALID_MESSAGE: "not msgpack, or not a msgpack-RPC message",
    ErrorCode.FRAME_TOO_LARGE: "a message exceeds the maximum frame size",
    ErrorCode.UNKNOWN_METHOD: "no method of that name",
    ErrorCode.INVALID_PARAMS: "params are not one map of the documented shape",
    ErrorCode.UNSUPPORTED_PROTOCOL: "protocol version not served by this daemon",
    ErrorCode.SESSION_NOT_FOUND: "no session with that id",
    ErrorCode.SESSION_BUSY: "the session has a run in flight; steer it instead",
    ErrorCode.NOT_RUNNING: "the session has no run in flight",
    ErrorCode.NOT_PENDING: "no open request with that call id (already answered, or the run ended)",
    ErrorCode.RUN_NOT_FOUND: "no run with that id, or the session has had no run yet",
    ErrorCode.MODEL_UNAVAILABLE: "unknown provider or model, or the provider is not usable",
    ErrorCode.CONFIG_INVALID: "a config file cannot be read; the message names it",
    ErrorCode.MODEL_FAILED: "the model call failed after retries",
    ErrorCode.TRUST_CHANGED: "a file changed since trust.show showed it; nothing was trusted",
    ErrorCode.STORE_FULL: "the disk holding the database is full; nothing was stored (a run in flight ended)",
    ErrorCode.STORE_UNAVAILABLE: "the database cannot be used (not opened, or damaged); the message says what to do",
    ErrorCode.PROMPT_BLOCKED: "a UserPromptSubmit hook refused the task or steering; the message says why",
    ErrorCode.IMPORT_INVALID: "a line of the file to import is wrong (data.line); nothing was imported",
    ErrorCode.APPROVAL_NEEDED: "a command's !`command` lines need a person's approval (data.lines); dispatch again with approved_lines",
    ErrorCode.SHUTTING_DOWN: "the daemon is shutting down",
    ErrorCode.INTERNAL: "a bug in the daemon; see its log",
}
