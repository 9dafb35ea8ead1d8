"""A blocking client on a stdlib socket: for scripts and the CLI (no trio needed).

    from roost.protocol import Client
    with Client.connect() as client:
        run = client.call("dispatch", task="count the files", model="scripted/demo")
        client.call("attach", session=run["session"])
        for event in client.events():
            print(event["type"])
            if event["type"] == "run.finished":
                break

Notifications that arrive while a call waits for its response are queued, never lost, and
handed out by :meth:`Client.next_notification` / :meth:`Client.events` in arrival order.

Pipelining with :meth:`Client.send_request` is fine in windows (a few hundred requests, then
their results): the daemon stops reading a connection whose answers nobody reads, so a
client that only sends, never reads, blocks both sides.
"""

from __future__ import annotations

import collections
import os
import socket
from typing import Any, Callable, Iterator

from ._address import default_socket_path
from ._errors import ConnectionClosed
from ._framing import DEFAULT_MAX_FRAME
from ._messages import Notification, Response
from ._methods import PROTOCOL_VERSION
from ._private import check_peer
from ._session import RpcSession, result_of

_READ_SIZE = 256 * 1024


class Client:
    """A blocking msgpack-RPC connection to the daemon.

    Resource handling:
        Owns one socket; close it with :meth:`close` or use the client as a context manager.
    """

    def __init__(self, sock: socket.socket, *, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self._sock = sock
        self._session = RpcSession(max_frame)
        self._responses: dict[int, Response] = {}
        self._notifications: collections.deque[Notification] = collections.deque()
        #: The daemon's answer to ``hello`` (empty until :meth:`hello` is called).
        self.info: dict[str, Any] = {}

    @classmethod
    def connect(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        client: str = "python",
        timeout: float | None = None,
        hello: bool = True,
    ) -> Client:
        """Connect to the daemon's socket and (by default) say hello.

        The process that serves the socket must run as the same user as this one (checked
        where the system tells: ``SO_PEERCRED`` on Linux).

        Raises:
            OSError: nothing listens on the socket (``FileNotFoundError``,
                ``ConnectionRefusedError``).
            NotPrivate: a process of another user serves the socket.
        """
        where = os.fspath(path if path is not None else default_socket_path())
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(where)
            check_peer(sock, where)
        except BaseException:
            sock.close()
            raise
        self = cls(sock)
        if hello:
            self.hello(client)
        return self

    def hello(self, client: str = "python") -> dict[str, Any]:
        """Exchange the handshake; the reply is kept in :attr:`info`."""
        self.info = self.call("hello", client=client, protocol=PROTOCOL_VERSION)
        return self.info

    def call(self, method: str, params: dict[str, Any] | None = None, /, **kwargs: Any) -> Any:
        """Call ``method`` with one map of params and wait for its result.

        Raises:
            RpcError: the daemon answered with an error.
            ConnectionClosed: the connection ended before the answer.
        """
        msgid = self.send_request(method, {**(params or {}), **kwargs})
        while msgid not in self._responses:
            self._read()
        return result_of(self._responses.pop(msgid))

    def call_streaming(
        self,
        method: str,
        params: dict[str, Any],
        on_notification: Callable[[dict[str, Any]], None],
    ) -> Any:
        """Like :meth:`call`, handing each notification that arrives meanwhile (as a map,
        see :func:`notification_map`) to ``on_notification`` as it comes: for ``chat``,
        whose deltas stream while the call runs."""
        msgid = self.send_request(method, params)
        while msgid not in self._responses:
            while self._notifications:
                on_notification(notification_map(self._notifications.popleft()))
            self._read()
        while self._notifications:
            on_notification(notification_map(self._notifications.popleft()))
        return result_of(self._responses.pop(msgid))

    def send_request(self, method: str, params: dict[str, Any]) -> int:
        """Send a request without waiting; return its msgid (see :meth:`wait_result`)."""
        msgid, data = self._session.request(method, params)
        self._send(data)
        return msgid

    def wait_result(self, msgid: int) -> Any:
        """Wait for the response to a request sent with :meth:`send_request`."""
        while msgid not in self._responses:
            self._read()
        return result_of(self._responses.pop(msgid))

    def next_notification(self, timeout: float | None = None) -> Notification | None:
        """The next notification, waiting up to ``timeout`` seconds (``None``: forever).

        Returns ``None`` when the timeout passes first.
        """
        if not self._notifications:
            previous = self._sock.gettimeout()
            self._sock.settimeout(timeout)
            try:
                while not self._notifications:
                    self._read()
            except (socket.timeout, BlockingIOError):
                return None
            finally:
                self._sock.settimeout(previous)
        return self._notifications.popleft()

    def events(self) -> Iterator[dict[str, Any]]:
        """Yield notifications as maps, forever (until the connection closes).

        ``event`` notifications yield the event map; others (``lagged``, ``error``) yield
        their params map with ``"type"`` set to the notification's name.
        """
        while True:
            note = self.next_notification()
            assert note is not None
            yield notification_map(note)

    def close(self) -> None:
        """Close the socket. Safe to call twice."""
        self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def fileno(self) -> int:
        """The socket's file descriptor (for ``select``)."""
        return self._sock.fileno()

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ConnectionClosed("the daemon closed the connection") from exc

    def _read(self) -> None:
        try:
            data = self._sock.recv(_READ_SIZE)
        except ConnectionResetError as exc:
            raise ConnectionClosed("the daemon closed the connection") from exc
        if not data:
            raise ConnectionClosed("the daemon closed the connection")
        for message in self._session.receive(data):
            if isinstance(message, Response):
                self._responses[message.msgid] = message
            else:
                self._notifications.append(message)


def notification_map(note: Notification) -> dict[str, Any]:
    """A notification as one map: the event itself, or the params with ``type`` set."""
    params = note.params[0] if note.params and isinstance(note.params[0], dict) else {}
    if note.method == "event":
        return params
    return {**params, "type": note.method}
