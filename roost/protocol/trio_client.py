"""The trio twin of :class:`roost.protocol.Client` (the only protocol module that imports trio).

    async with open_client() as client:
        run = await client.call("dispatch", task="...", model="scripted/demo")
        await client.call("attach", session=run["session"])
        async for note in client.notifications:
            ...

Calls may run concurrently from many tasks; responses are matched by msgid.
"""

from __future__ import annotations

import errno
import os
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import trio

from ._address import default_socket_path
from ._errors import ConnectionClosed, ProtocolError
from ._framing import DEFAULT_MAX_FRAME
from ._messages import Notification, Response
from ._version import PROTOCOL_VERSION
from ._private import check_peer
from ._session import RpcSession, result_of

#: Seconds a connect waits while the daemon's queue of new connections is full.
QUEUE_WAIT = 5.0

__all__ = ["TrioClient", "open_client"]


class TrioClient:
    """A msgpack-RPC connection under trio. Make one with :func:`open_client`."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        notifications: trio.MemoryReceiveChannel[Notification],
        send_notification: trio.MemorySendChannel[Notification],
        max_frame: int = DEFAULT_MAX_FRAME,
    ) -> None:
        self._stream = stream
        self._session = RpcSession(max_frame)
        self._waiters: dict[int, trio.MemorySendChannel[Response]] = {}
        self._send_lock = trio.Lock()
        self._send_notification = send_notification
        self._closed = False
        self._broken: ProtocolError | None = None
        #: Notifications from the daemon (events, ``lagged``), in arrival order.
        self.notifications = notifications
        #: The daemon's answer to ``hello``.
        self.info: dict[str, Any] = {}

    async def call(self, method: str, params: dict[str, Any] | None = None, /, **kwargs: Any) -> Any:
        """Call ``method`` and wait for its result.

        Raises:
            RpcError: the daemon answered with an error.
            ConnectionClosed: the connection ended before the answer.
        """
        if self._closed:
            raise ConnectionClosed("the connection is closed") from self._broken
        msgid, data = self._session.request(method, {**(params or {}), **kwargs})
        send, receive = trio.open_memory_channel[Response](1)
        self._waiters[msgid] = send
        try:
            async with self._send_lock:
                await self._stream.send_all(data)
            try:
                response = await receive.receive()
            except trio.EndOfChannel:
                raise ConnectionClosed("the daemon closed the connection") from self._broken
        except (trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            raise ConnectionClosed("the daemon closed the connection") from exc
        finally:
            self._waiters.pop(msgid, None)
        return result_of(response)

    async def _read_loop(self) -> None:
        try:
            while True:
                try:
                    data = await self._stream.receive_some(256 * 1024)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                if not data:
                    return
                try:
                    messages = self._session.receive(data)
                except ProtocolError as exc:
                    # Calls waiting now, and later ones, fail with this as the cause.
                    self._broken = exc
                    return
                for message in messages:
                    if isinstance(message, Response):
                        waiter = self._waiters.get(message.msgid)
                        if waiter is not None:
                            waiter.send_nowait(message)
                    else:
                        # Bounded on purpose: a caller that never reads notifications
                        # stalls its own reads, not the daemon (which detaches it).
                        await self._send_notification.send(message)
        finally:
            self._closed = True
            for waiter in self._waiters.values():
                waiter.close()
            self._send_notification.close()


@asynccontextmanager
async def open_client(
    path: str | os.PathLike[str] | None = None,
    *,
    client: str = "python-trio",
    hello: bool = True,
    buffer: int = 1024,
) -> AsyncIterator[TrioClient]:
    """Connect to the daemon, say hello, and yield a :class:`TrioClient`.

    The process that serves the socket must run as the same user as this one (checked
    where the system tells: ``SO_PEERCRED`` on Linux). Timeouts are the caller's, as
    everywhere in trio: wrap calls in ``trio.move_on_after`` or ``trio.fail_after``.

    Raises:
        OSError: nothing listens on the socket.
        NotPrivate: a process of another user serves the socket.

    Resource handling:
        The connection and its reader task live inside this context; leaving it closes both.
    """
    where = os.fspath(path if path is not None else default_socket_path())
    stream = await _connect(where)
    try:
        check_peer(stream.socket, where)
    except BaseException:
        await stream.aclose()
        raise
    send, receive = trio.open_memory_channel[Notification](buffer)
    async with stream, trio.open_nursery() as nursery:
        rpc = TrioClient(stream, receive, send)
        nursery.start_soon(rpc._read_loop)
        try:
            if hello:
                rpc.info = await rpc.call("hello", client=client, protocol=PROTOCOL_VERSION)
            yield rpc
        finally:
            nursery.cancel_scope.cancel()


async def _connect(where: str) -> trio.SocketStream:
    """A connected stream to ``where``, waiting (at most :data:`QUEUE_WAIT` seconds) while
    the daemon's queue of new connections is full.

    On a full queue a non-blocking Unix ``connect`` fails with EAGAIN, which trio takes for
    "in progress": it returns a socket that is not connected at all. So each try is checked,
    and made again after a short pause.

    Raises:
        OSError: nothing listens on the socket, or its queue stayed full.
    """
    deadline = trio.current_time() + QUEUE_WAIT
    pause = 0.005
    while True:
        stream = await trio.open_unix_socket(where)
        try:
            stream.socket.getpeername()
            return stream
        except OSError as exc:
            await stream.aclose()
            if exc.errno != errno.ENOTCONN:
                raise
        if trio.current_time() + pause > deadline:
            raise OSError(errno.EAGAIN, f"{where}: the daemon's queue of new connections stayed full for {QUEUE_WAIT:g} s")
        await trio.sleep(pause)
        pause = min(pause * 2, 0.1)
