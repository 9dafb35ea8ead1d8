"""The shell's connection to the daemon: msgpack-RPC on asyncio, on prompt_toolkit's loop.

Why asyncio and not the blocking :class:`roost.protocol.Client` in a thread: prompt_toolkit
runs on an asyncio loop, so a connection on that loop hands each event to the view and the
screen on the same thread, with no locks and no hand-off; and calls can overlap (an
``abort`` while a ``dispatch`` is still waiting for its answer), which one blocking client
cannot do while another thread reads its events. The protocol work is the sans-IO
:class:`roost.protocol.RpcSession` (msgids, pending table, framing) that the other clients
wrap too; this module only moves its bytes.

Error handling:
    :meth:`AsyncClient.call` raises :class:`RpcError` for an error response and
    :class:`ConnectionClosed` when the connection ends first (every call in flight gets it).
    Bytes that are not msgpack-RPC end the connection the same way. A daemon that stays
    silent while a call waits is treated as the blocking client treats it: after half the
    timeout the client asks for ``status``, after the other half the call raises
    :class:`Timeout` and the connection is closed (the other calls get
    :class:`ConnectionClosed`).

Transports: a Unix socket (:meth:`AsyncClient.open`), or the pipes of ``ssh HOST roost
bridge`` (:meth:`AsyncClient.open_ssh`, the same command line as the blocking client's:
see :mod:`roost.protocol._ssh`), whose stderr is kept to say why the connection ended.

Resource handling:
    An :class:`AsyncClient` owns its socket (or its ssh child) and its reader task;
    :meth:`AsyncClient.aclose` ends them. :meth:`AsyncClient.wait_closed` returns once the
    connection is over, however it ended.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from roost.protocol import (
    DEFAULT_TIMEOUT,
    PROTOCOL_VERSION,
    ConnectionClosed,
    Notification,
    ProtocolError,
    Response,
    RpcSession,
    SshHost,
    Timeout,
    check_peer,
    notification_map,
    result_of,
)
from roost.protocol._ssh import bridge_argv, unreachable
from roost.protocol._streams import ended_message, last_lines

_READ_SIZE = 256 * 1024
#: Bytes of an ssh child's stderr kept to explain its end.
_STDERR_TAIL = 4096
#: Seconds a closed ssh child may take to end by itself before it is killed.
_EXIT_WAIT = 1.0


class AsyncClient:
    """One connection to the daemon; notifications go to a callback as maps."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        on_notification: Callable[[dict[str, Any]], None],
        *,
        path: str,
        timeout: float | None = DEFAULT_TIMEOUT,
        process: asyncio.subprocess.Process | None = None,
    ) -> None:
        # Where the connection leads, for messages: a socket path or an ssh:// URL.
        self._path = path
        self._process = process
        self._stderr = bytearray()
        self._stderr_task: asyncio.Task[None] | None = None
        #: Seconds of silence after which a waiting call fails (None: never).
        self.timeout = timeout
        # How many reads brought bytes: the daemon's signs of life.
        self._reads = 0
        self._reader = reader
        self._writer = writer
        self._on_notification = on_notification
        self._session = RpcSession()
        self._waiting: dict[int, asyncio.Future[Response]] = {}
        self._closed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: The daemon's answer to ``hello``.
        self.info: dict[str, Any] = {}

    @classmethod
    async def open(
        cls,
        path: str,
        *,
        client: str,
        on_notification: Callable[[dict[str, Any]], None],
        timeout: float | None = DEFAULT_TIMEOUT,
    ) -> AsyncClient:
        """Connect to the socket at ``path`` and say hello as ``client``.

        Raises:
            OSError: nothing listens there (``FileNotFoundError``, ``ConnectionRefusedError``).
            ConnectionClosed: the daemon went away during the handshake.
            Timeout: the daemon did not take the connection, or answer, in time.
            NotPrivate: a process of another user serves the socket.
        """
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(path), timeout)
        except asyncio.TimeoutError:
            raise Timeout(f"the roost daemon at {path} did not accept the connection within {timeout:g} s") from None
        try:
            check_peer(writer.get_extra_info("socket"), path)
        except BaseException:
            writer.close()
            raise
        self = cls(reader, writer, on_notification, path=path, timeout=timeout)
        await self._start(client)
        return self

    @classmethod
    async def open_ssh(
        cls,
        host: str,
        *,
        client: str,
        on_notification: Callable[[dict[str, Any]], None],
        timeout: float | None = DEFAULT_TIMEOUT,
        start: bool = True,
        command: str | None = None,
    ) -> AsyncClient:
        """Connect to the daemon on the machine ``host`` (``ssh://[user@]host[:port]``)
        through ``ssh HOST roost bridge`` (``--no-start`` unless ``start``), as
        :meth:`roost.protocol.Client.connect_ssh` does, and say hello.

        Raises:
            ValueError: ``host`` is not an ``ssh://`` URL.
            OSError: ssh cannot be started; ``ConnectionRefusedError``: no daemon runs there
                (only when ``start`` is false).
            ConnectionClosed: ssh or the remote side ended before the handshake (the
                message has their last words).
            Timeout: nothing answered ``hello`` in time.
        """
        target = SshHost.parse(host)
        argv = bridge_argv(target, start=start, command=command, connect_timeout=timeout)
        # A session of its own: no terminal to ask on (BatchMode), and no Ctrl-C from it.
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        assert process.stdin is not None and process.stdout is not None
        self = cls(process.stdout, process.stdin, on_notification, path=target.url, timeout=timeout,
                   process=process)
        self._stderr_task = asyncio.create_task(self._keep_stderr())
        try:
            await self._start(client)
        except ConnectionClosed:
            raise unreachable(target, process.returncode, last_lines(self._stderr), start=start) from None
        return self

    async def _start(self, client: str) -> None:
        self._task = asyncio.create_task(self._read_loop())
        try:
            self.info = await self.call("hello", client=client, protocol=PROTOCOL_VERSION)
        except BaseException:
            await self.aclose()
            raise

    def has(self, method: str) -> bool:
        """Whether the daemon serves ``method`` (from its ``hello`` catalogue)."""
        return any(m.get("name") == method for m in self.info.get("methods", ()))

    @property
    def closed(self) -> bool:
        """Whether the connection is over."""
        return self._closed.is_set()

    async def call(self, method: str, params: dict[str, Any] | None = None, /, **kwargs: Any) -> Any:
        """Call ``method`` with one map of params; its result.

        Raises:
            RpcError: the daemon answered with an error.
            ConnectionClosed: the connection ended before the answer.
            Timeout: the daemon stayed silent for :attr:`timeout` (the connection is closed).
        """
        if self.closed:
            raise ConnectionClosed("not connected to the daemon")
        msgid, data = self._session.request(method, {**(params or {}), **kwargs})
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._waiting[msgid] = future
        try:
            self._writer.write(data)
            await self._writer.drain()
        except (ConnectionError, RuntimeError) as exc:
            self._waiting.pop(msgid, None)
            self._close()
            raise ConnectionClosed(self.ended) from exc
        return result_of(await self._answer(msgid, future))

    async def _answer(self, msgid: int, future: asyncio.Future[Response]) -> Response:
        """The response, unless the daemon stays silent for the timeout (see the module)."""
        if self.timeout is None:
            return await future
        checking = False
        while True:
            reads = self._reads
            done, _ = await asyncio.wait({future}, timeout=self.timeout / 2)
            if done:
                return future.result()
            if self._reads != reads:
                checking = False
            elif not checking:
                # Its answer is dropped by the read loop: no one waits for that msgid.
                self._writer.write(self._session.request("status", {})[1])
                checking = True
            else:
                self._waiting.pop(msgid, None)
                self._close()
                raise Timeout(f"the roost daemon at {self._path} did not answer within {self.timeout:g} s")

    async def wait_closed(self) -> None:
        """Return when the connection has ended."""
        await self._closed.wait()

    @property
    def ended(self) -> str:
        """Why the connection ended, in words: for ssh, its last words and exit status."""
        if self._process is None:
            return "the daemon closed the connection"
        return ended_message(self._path, last_lines(self._stderr), self._process.returncode)

    async def aclose(self) -> None:
        """Close the connection, and end the ssh child if there is one (safe to call twice)."""
        self._close()
        for task in (self._task, self._stderr_task):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass
        if self._process is not None and self._process.returncode is None:
            # Its stdin is closed: it ends by itself once the remote side has; else it is killed.
            try:
                await asyncio.wait_for(self._process.wait(), _EXIT_WAIT)
            except asyncio.TimeoutError:
                self._process.kill()
                await self._process.wait()

    def _close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._writer.close()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ConnectionClosed(self.ended))
        self._waiting.clear()

    async def _last_words(self) -> None:
        """Once an ssh child's stdout ends, give it a moment to finish saying why."""
        if self._process is None:
            return
        # Shielded: at the time limit, stderr is still read (the tail may still come).
        waits = [self._process.wait(), *([asyncio.shield(self._stderr_task)] if self._stderr_task else [])]
        try:
            await asyncio.wait_for(asyncio.gather(*waits), 0.5)
        except asyncio.TimeoutError:
            pass

    async def _keep_stderr(self) -> None:
        """Read the ssh child's stderr as it comes (so it never blocks on it); keep its tail."""
        assert self._process is not None and self._process.stderr is not None
        while chunk := await self._process.stderr.read(_READ_SIZE):
            self._stderr += chunk
            del self._stderr[:-_STDERR_TAIL]

    async def _read_loop(self) -> None:
        try:
            while True:
                data = await self._reader.read(_READ_SIZE)
                if not data:
                    await self._last_words()
                    return
                self._reads += 1
                for message in self._session.receive(data):
                    if isinstance(message, Response):
                        future = self._waiting.pop(message.msgid, None)
                        if future is not None and not future.done():
                            future.set_result(message)
                    elif isinstance(message, Notification):
                        self._on_notification(notification_map(message))
        except (ConnectionError, ProtocolError):
            return
        finally:
            self._close()
