"""The wire protocol: msgpack-RPC over a Unix socket, and the small clients.

Layers, each wrapping the one below (as in pynvim): :class:`Decoder` (bytes to messages,
with a frame limit) → :class:`RpcSession` (msgids and the pending table) → the clients
(:class:`Client` here, blocking; ``roost.protocol.trio_client`` for trio). Imports msgpack
and the stdlib only.
"""

from ._address import default_socket_path
from ._client import DEFAULT_TIMEOUT, Client, notification_map
from ._errors import (
    ConnectionClosed,
    ErrorCode,
    FrameTooLarge,
    NotPrivate,
    ProtocolError,
    RoostError,
    RpcError,
    Timeout,
    error_table,
)
from ._framing import DEFAULT_MAX_FRAME, Decoder
from ._messages import Message, Notification, Request, Response, encode, pack, parse
from ._version import API_COMPATIBLE, API_LEVEL, PROTOCOL_VERSION
from ._private import check_peer, check_private_dir, peer_credentials
from ._session import RpcSession, result_of
from ._vocabulary import MODES, SANDBOX_MODES, STOP_REASONS, SUCCESS_REASONS

__all__ = [
    "API_COMPATIBLE",
    "API_LEVEL",
    "Client",
    "ConnectionClosed",
    "DEFAULT_MAX_FRAME",
    "DEFAULT_TIMEOUT",
    "Decoder",
    "ErrorCode",
    "FrameTooLarge",
    "METHODS",
    "METHODS_BY_NAME",
    "MODES",
    "Message",
    "Method",
    "NotPrivate",
    "Notification",
    "PROTOCOL_VERSION",
    "Param",
    "ProtocolError",
    "Request",
    "Response",
    "RoostError",
    "RpcError",
    "RpcSession",
    "SANDBOX_MODES",
    "STOP_REASONS",
    "SUCCESS_REASONS",
    "Timeout",
    "check_peer",
    "check_private_dir",
    "default_socket_path",
    "encode",
    "error_table",
    "notification_map",
    "pack",
    "parse",
    "peer_credentials",
    "result_of",
]

#: Imported when first asked for: a client needs the protocol, not the method catalogue.
_CATALOGUE = frozenset({"METHODS", "METHODS_BY_NAME", "Method", "Param"})


def __getattr__(name: str) -> object:
    if name in _CATALOGUE:
        from . import _methods

        return getattr(_methods, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
