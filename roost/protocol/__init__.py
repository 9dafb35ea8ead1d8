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
from ._messages import (
    Message,
    Notification,
    Packed,
    Request,
    Response,
    encode,
    encode_packed,
    notification_head,
    pack,
    packed_array,
    packed_map,
    parse,
)
from ._methods import (
    API_COMPATIBLE,
    API_LEVEL,
    METHODS,
    METHODS_BY_NAME,
    PROTOCOL_VERSION,
    Method,
    Param,
)
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
    "Packed",
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
    "encode_packed",
    "error_table",
    "notification_head",
    "notification_map",
    "pack",
    "packed_array",
    "packed_map",
    "parse",
    "peer_credentials",
    "result_of",
]
