"""A blocking client on a stdlib socket or an ssh child's pipes: for scripts and the CLI.

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

import _socket
import collections
import os
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ._address import default_socket_path
from ._errors import ConnectionClosed, Timeout
from ._framing import DEFAULT_MAX_FRAME
from ._messages import Notification, Response
from ._version import PROTOCOL_VERSION
from ._session import RpcSession, result_of
from ._streams import ProcessStream, SocketStream, Stream, connect_unix

if TYPE_CHECKING:
    import socket

_READ_SIZE = 256 * 1024

#: Seconds of silence from the daemon after which a waiting call gives up on it (see above).
DEFAULT_TIMEOUT = 30.0


class Client:
    """A blocking msgpack-RPC connection to the daemon.

    ``timeout`` (seconds, or None to wait for ever) bounds how long the daemon may stay
    silent while a call waits for its answer, and how long sending may block; see the
    module's docstring. It does not bound :meth:`next_notification` or :meth:`events`.

    It talks over a :class:`Stream`: a Unix socket (:meth:`connect`), or a child process's
    pipes, such as ``ssh HOST roost bridge`` (:meth:`connect_ssh`). A plain connected
    socket is taken as it is.

    Resource handling:
        Owns its stream (a socket, or a child process); close it with :meth:`close` or use
        the client as a context manager.
    """

    def __init__(
        self,
        stream: Stream | socket.socket,
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
        timeout: float | None = DEFAULT_TIMEOUT,
    ) -> None:
        _check_timeout(timeout)
        if isinstance(stream, _socket.socket):  # the stdlib's socket.socket is one
            stream = SocketStream(stream, _peer_name(stream))
        self._sock = stream
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
        stream.settimeout(None if timeout is None else timeout / 2)
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
        catalogue: bool = True,
    ) -> Client:
        """Connect to the daemon's socket and (by default) say hello (``catalogue=False``: its
        answer leaves out the methods, events and errors).

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
        self = cls(connect_unix(where, timeout), timeout=timeout)
        if hello:
            self._hello_or_close(client, catalogue)
        return self

    @classmethod
    def connect_ssh(
        cls,
        host: str,
        *,
        start: bool = True,
        command: str | None = None,
        client: str = "python",
        timeout: float | None = DEFAULT_TIMEOUT,
        catalogue: bool = True,
    ) -> Client:
        """Connect to the daemon of a user on another machine, over OpenSSH, and say hello.

        ``host`` is ``ssh://[user@]host[:port]``. The connection is ``ssh HOST roost
        bridge`` (see :func:`roost.protocol.ssh_argv`: ``ROOST_SSH_COMMAND``, the remote
        ``command`` or ``ROOST_REMOTE_COMMAND``, a shared connection, never a question to
        a person); the remote ``roost bridge`` starts that daemon if none runs, unless
        ``start`` is false. No local daemon is involved; the remote bridge checks the
        remote socket's folder and peer as a local command does.

        Raises:
            ValueError: ``host`` is not an ``ssh://`` URL, or ``ROOST_SSH_COMMAND`` is bad.
            ConnectionRefusedError: no daemon runs there (only when ``start`` is false).
            SshFailed: ssh could not reach the host or log in (its last words).
            ConnectionClosed: the remote side ended before the handshake (the message has
                its last words and the exit status).
            Timeout: nothing answered ``hello`` in time.
        """
        from ._ssh import SshHost, bridge_argv, unreachable

        _check_timeout(timeout)
        target = SshHost.parse(host)
        argv = bridge_argv(target, start=start, command=command, connect_timeout=timeout)
        stream = ProcessStream(argv, target.url)
        self = cls(stream, timeout=timeout)
        try:
            self.hello(client, catalogue)
        except ConnectionClosed:
            failure = unreachable(target, stream.wait_exit(), stream.last_words(), start=start)
            self.close()
            raise failure from None
        except BaseException:
            self.close()
            raise
        return self

    def _hello_or_close(self, client: str, catalogue: bool) -> None:
        try:
            self.hello(client, catalogue)
        except BaseException:
            self.close()
            raise

    def hello(self, client: str = "python", catalogue: bool = True) -> dict[str, Any]:
        """Exchange the handshake; the reply is kept in :attr:`info` (without the methods,
        events and errors when ``catalogue`` is false)."""
        # A daemon before API level 8 ignores ``catalogue`` and sends it all.
        self.info = self.call("hello", client=client, protocol=PROTOCOL_VERSION, catalogue=catalogue)
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

    @property
    def stream(self) -> Stream:
        """What the client talks over."""
        return self._sock

    def close(self) -> None:
        """Close the stream (and end its child process, if it has one). Safe to call twice."""
        self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def fileno(self) -> int:
        """The file descriptor the daemon's bytes arrive on (for ``select``)."""
        return self._sock.fileno()

    def _send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise ConnectionClosed(self._sock.ended()) from exc
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
        return Timeout(f"the roost daemon at {self._sock.where} did not answer within {self.timeout:g} s")

    def _read(self) -> None:
        try:
            data = self._sock.recv(_READ_SIZE)
        except ConnectionResetError as exc:
            raise ConnectionClosed(self._sock.ended()) from exc
        if not data:
            raise ConnectionClosed(self._sock.ended())
        for message in self._session.receive(data):
            if isinstance(message, Response):
                if message.msgid in self._checks:
                    self._checks.discard(message.msgid)
                else:
                    self._responses[message.msgid] = message
            else:
                self._notifications.append(message)


def _peer_name(sock: socket.socket) -> str:
    try:
        return sock.getpeername() or "its socket"
    except OSError:
        return "its socket"


def _check_timeout(timeout: float | None) -> None:
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds or None, not {timeout!r}")


def notification_map(note: Notification) -> dict[str, Any]:
    """A notification as one map: the event itself, or the params with ``type`` set."""
    params = note.params[0] if note.params and isinstance(note.params[0], dict) else {}
    if note.method == "event":
        return params
    return {**params, "type": note.method}
