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

Timeouts: a call waits as long as the daemon is alive, since some answers take long (a
``chat`` with a slow model, a ``dispatch`` that starts MCP servers). What the client's
``timeout`` bounds is silence: when nothing has come from the daemon for half of it while
a call waits, the client asks for ``status``; when nothing comes for the other half either,
the call raises :class:`Timeout`. Waiting for notifications is not bounded (a quiet session
is no fault) unless :meth:`Client.events` is given ``check_after``.
"""

from __future__ import annotations

import collections
import os
import socket
import time
from typing import Any, Callable, Iterator

from ._address import default_socket_path
from ._errors import ConnectionClosed, Timeout
from ._framing import DEFAULT_MAX_FRAME
from ._messages import Notification, Response
from ._version import PROTOCOL_VERSION
from ._private import check_peer
from ._session import RpcSession, result_of

_READ_SIZE = 256 * 1024

#: Seconds of silence from the daemon after which a waiting call gives up on it (see above).
DEFAULT_TIMEOUT = 30.0


class Client:
    """A blocking msgpack-RPC connection to the daemon.

    ``timeout`` (seconds, or None to wait for ever) bounds how long the daemon may stay
    silent while a call waits for its answer, and how long sending may block; see the
    module's docstring. It does not bound :meth:`next_notification` or :meth:`events`.

    Resource handling:
        Owns one socket; close it with :meth:`close` or use the client as a context manager.
    """

    def __init__(
        self,
        sock: socket.socket,
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
        timeout: float | None = DEFAULT_TIMEOUT,
    ) -> None:
        _check_timeout(timeout)
        self._sock = sock
        self._session = RpcSession(max_frame)
        self._responses: dict[int, Response] = {}
        self._notifications: collections.deque[Notification] = collections.deque()
        # Requests sent to see whether a silent daemon is still there: their answers are
        # dropped.
        self._checks: set[int] = set()
        #: Seconds of silence after which a waiting call fails (None: never).
        self.timeout = timeout
        # The socket waits half the timeout at a time: one silent half asks for status,
        # a second one gives up.
        sock.settimeout(None if timeout is None else timeout / 2)
        #: The daemon's answer to ``hello`` (empty until :meth:`hello` is called).
        self.info: dict[str, Any] = {}

    @classmethod
    def connect(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        client: str = "python",
        timeout: float | None = DEFAULT_TIMEOUT,
        hello: bool = True,
    ) -> Client:
        """Connect to the daemon's socket and (by default) say hello.

        The process that serves the socket must run as the same user as this one (checked
        where the system tells: ``SO_PEERCRED`` on Linux).

        Raises:
            OSError: nothing listens on the socket (``FileNotFoundError``,
                ``ConnectionRefusedError``).
            NotPrivate: a process of another user serves the socket.
            Timeout: the daemon does not accept the connection, or answer ``hello``, in time.
        """
        _check_timeout(timeout)
        where = os.fspath(path if path is not None else default_socket_path())
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            _connect(sock, where, timeout)
            check_peer(sock, where)
        except BaseException:
            sock.close()
            raise
        self = cls(sock, timeout=timeout)
        if hello:
            try:
                self.hello(client)
            except BaseException:
                self.close()
                raise
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
            Timeout: the daemon stayed silent for :attr:`timeout`.
        """
        return self.wait_result(self.send_request(method, {**(params or {}), **kwargs}))

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
            self._read_or_check()
        while self._notifications:
            on_notification(notification_map(self._notifications.popleft()))
        return result_of(self._responses.pop(msgid))

    def send_request(self, method: str, params: dict[str, Any]) -> int:
        """Send a request without waiting; return its msgid (see :meth:`wait_result`).

        Raises:
            ConnectionClosed: the connection is over.
            Timeout: the daemon has not taken the bytes for half of :attr:`timeout`.
        """
        msgid, data = self._session.request(method, params)
        self._send(data)
        return msgid

    def wait_result(self, msgid: int) -> Any:
        """Wait for the response to a request sent with :meth:`send_request`.

        Raises the same errors as :meth:`call`.
        """
        while msgid not in self._responses:
            self._read_or_check()
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
            except (TimeoutError, BlockingIOError):
                return None
            finally:
                self._sock.settimeout(previous)
        return self._notifications.popleft()

    def events(self, *, check_after: float | None = None) -> Iterator[dict[str, Any]]:
        """Yield notifications as maps, forever (until the connection closes).

        ``event`` notifications yield the event map; others (``lagged``, ``error``) yield
        their params map with ``"type"`` set to the notification's name.

        With ``check_after``, a silence of that many seconds makes the client call
        ``status`` to see whether the daemon is still there, so that a frozen daemon
        raises :class:`Timeout` instead of leaving the caller waiting for ever.
        """
        while True:
            note = self.next_notification(check_after)
            if note is None:
                self.call("status")
                continue
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
        except TimeoutError:
            raise self._timeout() from None

    def _read_or_check(self) -> None:
        """Read what comes; after a silent half timeout ask for status, after two give up."""
        try:
            self._read()
            return
        except TimeoutError:
            pass
        msgid, data = self._session.request("status", {})
        self._checks.add(msgid)
        self._send(data)
        try:
            self._read()
        except TimeoutError:
            raise self._timeout() from None

    def _timeout(self) -> Timeout:
        try:
            where = self._sock.getpeername() or "its socket"
        except OSError:
            where = "its socket"
        return Timeout(f"the roost daemon at {where} did not answer within {self.timeout:g} s")

    def _read(self) -> None:
        try:
            data = self._sock.recv(_READ_SIZE)
        except ConnectionResetError as exc:
            raise ConnectionClosed("the daemon closed the connection") from exc
        if not data:
            raise ConnectionClosed("the daemon closed the connection")
        for message in self._session.receive(data):
            if isinstance(message, Response):
                if message.msgid in self._checks:
                    self._checks.discard(message.msgid)
                else:
                    self._responses[message.msgid] = message
            else:
                self._notifications.append(message)


def _connect(sock: socket.socket, where: str, timeout: float | None) -> None:
    sock.settimeout(timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        try:
            sock.connect(where)
            return
        except BlockingIOError:
            # With a timeout the socket is non-blocking, and connecting to a Unix socket
            # whose backlog is full fails at once instead of waiting: wait here.
            if deadline is not None and time.monotonic() > deadline:
                break
            time.sleep(0.01)
        except TimeoutError:
            break
    raise Timeout(f"the roost daemon at {where} did not accept the connection within {timeout:g} s")


def _check_timeout(timeout: float | None) -> None:
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds or None, not {timeout!r}")


def notification_map(note: Notification) -> dict[str, Any]:
    """A notification as one map: the event itself, or the params with ``type`` set."""
    params = note.params[0] if note.params and isinstance(note.params[0], dict) else {}
    if note.method == "event":
        return params
    return {**params, "type": note.method}
