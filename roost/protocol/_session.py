"""The client side of msgpack-RPC as a sans-IO object: msgids and the pending table.

Both clients (blocking and trio) wrap one :class:`RpcSession`: they write the bytes it
returns and feed it the bytes they read. Responses are matched to requests by msgid, never by
order, and a response for a msgid we never sent is a protocol error, not a guess.
"""

from __future__ import annotations

from typing import Any, Union

from ._errors import ProtocolError, RpcError
from ._framing import DEFAULT_MAX_FRAME, Decoder
from ._messages import Notification, Request, Response, encode


class RpcSession:
    """Track outstanding requests of one connection; no IO."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self._decoder = Decoder(max_frame)
        self._next_msgid = 0
        self._pending: dict[int, str] = {}

    def request(self, method: str, params: dict[str, Any] | None = None) -> tuple[int, bytes]:
        """Start a call; return its msgid and the bytes to send."""
        msgid = self._next_msgid
        self._next_msgid = (self._next_msgid + 1) % 2**32
        self._pending[msgid] = method
        return msgid, encode(Request(msgid, method, [params if params is not None else {}]))

    @property
    def pending(self) -> int:
        """How many requests are waiting for their response."""
        return len(self._pending)

    def receive(self, data: bytes | bytearray) -> list[Union[Response, Notification]]:
        """Feed bytes read from the peer; return responses and notifications in order.

        Raises:
            ProtocolError: the bytes are not msgpack-RPC, or answer a msgid never sent.
        """
        out: list[Union[Response, Notification]] = []
        for message in self._decoder.feed(data):
            if isinstance(message, ProtocolError):
                raise message
            if isinstance(message, Response):
                if self._pending.pop(message.msgid, None) is None:
                    raise ProtocolError(f"response to unknown msgid {message.msgid}")
                out.append(message)
            elif isinstance(message, Notification):
                out.append(message)
            else:
                raise ProtocolError("the daemon does not send requests to clients")
        return out


def result_of(response: Response) -> Any:
    """The result of a response, or raise its error as :class:`RpcError`."""
    if response.error is not None:
        raise RpcError.from_wire(response.error)
    return response.result
