"""The wire protocol: msgpack-RPC over a Unix socket (or over ssh), and the small clients.

Layers, each wrapping the one below (as in pynvim): a byte stream (:class:`Stream`: a Unix
socket, or the pipes of ``ssh HOST roost bridge``) → :class:`Decoder` (bytes to messages,
with a frame limit) → :class:`RpcSession` (msgids and the pending table) → the clients
(:class:`Client` here, blocking; ``roost.protocol.asyncio_client`` and
``roost.protocol.trio_client``). Imports msgpack and the stdlib only.
"""

from typing import TYPE_CHECKING

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
    SshFailed,
    Timeout,
    error_table,
)
from ._framing import DEFAULT_MAX_FRAME, DISPATCH_IMAGE_BYTES, Decoder
from ._messages import (
    Message,
    Notification,
    Packed,
    Request,
    Response,
    encode,
    encode_packed,
    encode_response,
    notification_head,
    pack,
    packed_array,
    packed_map,
    parse,
)
from ._version import API_COMPATIBLE, API_LEVEL, PROTOCOL_VERSION
from ._private import check_peer, check_private_dir, peer_credentials
from ._session import RpcSession, result_of
from ._streams import ProcessStream, SocketStream, Stream, connect_unix
from ._vocabulary import MODES, SANDBOX_MODES, STOP_REASONS, SUCCESS_REASONS

if TYPE_CHECKING:  # imported when first asked for (see __getattr__); the type checker sees them now
    from ._methods import METHODS, METHODS_BY_NAME, Method, Param
    from ._ssh import BRIDGE_NO_DAEMON, SshHost, bridge_argv, control_dir, ssh_argv

__all__ = [
    "API_COMPATIBLE",
    "API_LEVEL",
    "BRIDGE_NO_DAEMON",
    "Client",
    "ConnectionClosed",
    "DEFAULT_MAX_FRAME",
    "DEFAULT_TIMEOUT",
    "DISPATCH_IMAGE_BYTES",
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
    "ProcessStream",
    "ProtocolError",
    "Request",
    "Response",
    "RoostError",
    "RpcError",
    "RpcSession",
    "SANDBOX_MODES",
    "STOP_REASONS",
    "SUCCESS_REASONS",
    "SocketStream",
    "SshFailed",
    "SshHost",
    "Stream",
    "Timeout",
    "bridge_argv",
    "check_peer",
    "check_private_dir",
    "connect_unix",
    "control_dir",
    "default_socket_path",
    "encode",
    "encode_packed",
    "encode_response",
    "error_table",
    "notification_head",
    "notification_map",
    "pack",
    "packed_array",
    "packed_map",
    "parse",
    "peer_credentials",
    "result_of",
    "ssh_argv",
]

#: Imported when first asked for: a client needs the protocol, not the method catalogue,
#: and a local command not ssh (shlex, dataclasses: ~2 ms of ``roost status``).
_CATALOGUE = frozenset({"METHODS", "METHODS_BY_NAME", "Method", "Param"})
_SSH = frozenset({"BRIDGE_NO_DAEMON", "SshHost", "bridge_argv", "control_dir", "ssh_argv"})


def __getattr__(name: str) -> object:
    if name in _CATALOGUE:
        from . import _methods

        return getattr(_methods, name)
    if name in _SSH:
        from . import _ssh

        return getattr(_ssh, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
