"""The daemon's lifetime: lock, socket, store, connections, signals, clean shutdown.

The database: a damaged one (not a database, malformed) is never written to: it is set
aside (``roost.db.corrupt-<time>``), the daemon starts with a new one, and ``hello`` and
``status`` carry a notice saying where the old one went and how to recover its sessions.
One that does not open otherwise (a full disk, an I/O error, no permission) does not stop
the daemon from starting: it answers what needs no database and refuses the rest with the
reason (see :mod:`._unavailable`) until the database opens.

Error handling:
    A client's mistake or disappearance ends that connection only; it is logged and never
    reaches the server nursery. Bytes that are not msgpack get an ``error`` notification and
    the connection is closed; a message that is not msgpack-RPC gets an error response (or
    notification when it has no msgid) and the connection goes on.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import signal
import socket as stdsocket
import sys
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any

import trio

from roost.protocol import (
    DEFAULT_MAX_FRAME,
    Decoder,
    ErrorCode,
    Notification,
    ProtocolError,
    Request,
    Response,
    RpcError,
    check_private_dir,
    default_socket_path,
    encode,
    peer_credentials,
)

from .._paths import log_dir, private_opener, state_dir
from ..folder._project import user_config_file
from ..folder._trust import TrustStore
from ..mcp import McpManager
from ..memory import MemoryIndex
from ..memory._embedder import embed_as_configured
from ..runs._scheduled import scheduled_run, session_running
from ..schedules import Scheduler, ScheduleTable
from ..providers import ProviderRegistry
from ..runs._conductor import Conductor
from ..runs._fanout import Fanout
from ..sandbox import Sandbox, default_backend
from ..storage._store import EventStore, StoreDamaged, StoreError, set_aside
from ..tools import ProcessLedger, ToolRegistry
from ._api import Api
from ._connection import Connection
from ._unavailable import RETRY, Unavailable

log = logging.getLogger(__name__)

#: Requests of one connection handled at the same time.
REQUESTS_PER_CONNECTION = 64
#: Bytes read from a connection at once. Python allocates a read's whole size before the
#: call: 256 KiB cost ~10 µs a read here (the allocator maps and unmaps it each time), 64
#: KiB ~1 µs; a request is mostly a few hundred bytes.
READ_SIZE = 64 * 1024
#: Worker threads for the daemon's blocking work that has no limiter of its own (reading
#: a folder's config and prompt files, starting processes, name lookups), all sessions
#: together: trio's default limiter, which allows 40. Few on purpose, as libuv's pool has
#: 4: a worker thread takes Python's one interpreter lock (the GIL) again after each
#: system call, and once a burst of work has dozens of threads waiting for it, the event
#: loop and every thread wait on each other. At 1,000 sessions (bench/scale.py) a step's
#: median overhead was 3-4 times lower with 4 than with 40.
WORKER_THREADS = 4
#: Methods that never wait on anything slow (a client, a run): answered in the reader.
_INLINE = frozenset({"hello", "detach", "steer", "abort", "shutdown"})


class AlreadyRunning(RuntimeError):
    """Another daemon holds the lock for this socket."""


@dataclass(frozen=True)
class _Listening:
    """Where connections are accepted, and whom to tell once they are."""

    listener: trio.SocketListener
    nursery: trio.Nursery
    task_status: Any


class Daemon:
    """One roost daemon. Use :func:`serve`."""

    def __init__(
        self,
        socket_path: Path,
        database: Path,
        max_frame: int = DEFAULT_MAX_FRAME,
        *,
        sync: str = "normal",
        bwrap: str | None = None,
    ) -> None:
        self.socket_path = socket_path
        self.database = database
        self.sync = sync
        #: The bubblewrap program the sandbox uses (None: ROOST_BWRAP, else bwrap on PATH).
        self.bwrap = bwrap
        self.max_frame = max_frame
        self.stopping = trio.Event()
        self._connections: set[Connection] = set()
        #: Who is attached to which session (set once the store is open).
        self.fanout: Fanout | None = None
        #: The tools, and the worker threads they share (set once the store is open).
        self.tools: ToolRegistry | None = None
        #: What the user should hear of (a damaged database set aside): hello and status.
        self.notices: list[str] = []
        #: What answers requests: without a database, then the full api once it opens.
        self.api: Api | Unavailable | None = None

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen until shutdown is asked for (method or SIGTERM/SIGINT), then stop cleanly.

        A listening socket passed by systemd (LISTEN_FDS) is used as it is, and left in
        place at exit for the next activation; otherwise the daemon binds its own.
        """
        trio.to_thread.current_default_thread_limiter().total_tokens = WORKER_THREADS
        activated = _activated_socket()
        if activated is not None:
            self.socket_path = Path(activated.getsockname())
        lock = _acquire_lock(self.socket_path)
        try:
            if activated is not None:
                listener = trio.SocketListener(trio.socket.from_stdlib_socket(activated))
            else:
                listener = await _listen(self.socket_path)
            try:
                # Connections outlive the phases: one made while the database does not open
                # goes on, served as usual, once it does.
                async with trio.open_nursery() as connections:
                    connections.start_soon(self._watch_signals)
                    started = _Listening(listener, connections, task_status)
                    try:
                        store: EventStore | None = self._open_store()
                    except StoreError as exc:
                        store = await self._serve_without_store(exc, started)
                    if store is None:  # stopped before the database opened
                        await listener.aclose()
                        self._end_connections()
                    else:
                        try:
                            await self._serve(store, started)  # it closes the listener and connections
                        finally:
                            store.close()
                    connections.cancel_scope.cancel()
            finally:
                if activated is None:
                    with contextlib.suppress(FileNotFoundError):
                        self.socket_path.unlink()
        finally:
            lock.close()

    def _open_store(self) -> EventStore:
        """The database, opened (blocking). A damaged one is never written to: it is set
        aside, a new one is made, and :attr:`notices` says where the old one went.

        Raises:
            StoreError: it cannot be opened (a full disk, an I/O error, no permission).
        """
        try:
            return EventStore.open(self.database, sync=self.sync)
        except StoreDamaged as exc:
            aside = set_aside(self.database)
            notice = (
                f"{exc}: it was moved to {aside} (with its -wal and -shm files, if any) and roost "
                f"started with an empty database. Its sessions may be recovered with "
                f"`sqlite3 {aside} .recover | sqlite3 {aside}.recovered`; to use that file, stop "
                f"the daemon (roost stop) and put it in place of {self.database}"
            )
            log.error("%s", notice)
            print(f"roost daemon: {notice}", file=sys.stderr, flush=True)
            self.notices.append(notice)
            return EventStore.open(self.database, sync=self.sync)

    async def _serve_without_store(self, error: StoreError, started: _Listening) -> EventStore | None:
        """Serve what needs no database (see :mod:`._unavailable`) and try to open it every
        few seconds; the store once it opens, None when the daemon is stopped first."""
        log.error("%s; serving without it until it opens", error)
        unavailable = Unavailable(str(self.socket_path), error, self.stopping, self.notices)
        self._answer_with(unavailable, started)
        while not self.stopping.is_set():
            with trio.move_on_after(RETRY):
                await self.stopping.wait()
            if self.stopping.is_set():
                break
            try:
                store = await trio.to_thread.run_sync(self._open_store)
            except StoreError as exc:
                unavailable.error = exc
            else:
                log.info("the database opened: %s", self.database)
                return store
        return None

    def _end_connections(self) -> None:
        # Each writer sends what clients were answered, then ends its connection.
        for connection in list(self._connections):
            connection.close_outbox()

    def _answer_with(self, api: Api | Unavailable, listening: _Listening) -> None:
        """Answer requests with ``api`` from now on; the first one starts accepting
        connections and tells whoever started the daemon that it listens."""
        first = self.api is None
        self.api = api
        if first:
            listening.nursery.start_soon(self._accept, listening.listener, listening.nursery)
            listening.task_status.started()

    async def _serve(self, store: EventStore, started: _Listening) -> None:
        providers = ProviderRegistry()
        ledger = ProcessLedger(self.socket_path.parent / (self.socket_path.name + ".tools"))
        async with trio.open_nursery() as root:
            await root.start(store.run_writer)
            async with trio.open_nursery() as nursery:
                mcp = McpManager(nursery, log_dir() / "mcp")
                trust = TrustStore(state_dir() / "trust.json")
                sandbox = Sandbox(default_backend(self.bwrap), self._private_paths())
                availability = await sandbox.probe()
                if not availability.available:
                    log.warning("no sandbox: %s; only runs in mode off can run commands", availability.reason)
                self.fanout = Fanout(store.packed_events)
                self.tools = ToolRegistry()
                memory = await trio.to_thread.run_sync(MemoryIndex.open, self._memory_path)
                conductor = Conductor(
                    store, self.fanout, providers, self.tools, nursery, ledger, mcp, trust, sandbox, memory
                )
                nursery.start_soon(memory.embedder.run)  # entries' embeddings (see memory._embedder)
                await embed_as_configured(memory, providers)
                await conductor.start()
                schedules = await trio.to_thread.run_sync(ScheduleTable.open, self.database)
                scheduler = Scheduler(schedules, partial(scheduled_run, conductor), partial(session_running, conductor))
                await nursery.start(scheduler.run)
                api = Api(conductor, str(self.socket_path), self.stopping, self.notices, scheduler)
                self._answer_with(api, started)
                log.info("listening on %s (pid %d)", self.socket_path, os.getpid())
                await self.stopping.wait()
                log.info("shutting down")
                await started.listener.aclose()
                await conductor.shutdown()
                ledger.close()
                self._end_connections()
                nursery.cancel_scope.cancel()
            with trio.CancelScope(shield=True):
                await memory.close()
                await schedules.close()
            store.stop_writer()
        log.info("stopped")

    @property
    def _memory_path(self) -> Path:
        """The memory index (see ``memory._index``), beside the database."""
        return self.database.with_name("memory.db")

    def _private_paths(self) -> list[str]:
        """What commands must never see, wherever each is configured: the daemon's socket
        (through it a command could start a run of its own) and what lies beside it (the
        ledger, ssh's control sockets), database, trust and logs, the user's config, and the
        user's runtime folder (agent and bus sockets)."""
        socket = str(self.socket_path)
        database = str(self.database)
        runtime = [os.environ.get("XDG_RUNTIME_DIR") or "", f"/run/user/{os.getuid()}"]
        return [
            *(p for p in runtime if p),
            *_socket_files(socket),
            *(path + suffix for path in (database, str(self._memory_path)) for suffix in ("", "-wal", "-shm")),
            str(state_dir()),
            str(log_dir()),
            str(user_config_file().parent),
        ]

    async def _watch_signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.info("signal %s", signal.Signals(signum).name)
                self.stopping.set()
                return

    async def _accept(self, listener: trio.SocketListener, nursery: trio.Nursery) -> None:
        while True:
            try:
                stream = await listener.accept()
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS):
                    log.error("accept failed: %s; pausing", exc)
                    await trio.sleep(0.1)
                    continue
                raise
            nursery.start_soon(self._handle, stream)

    async def _handle(self, stream: trio.SocketStream) -> None:
        connection = Connection(stream)
        self._connections.add(connection)
        try:
            uid = _peer_uid(stream)
            if uid is not None and uid != os.getuid():
                log.warning("refused a connection from uid %d", uid)
                await stream.send_all(_error_note(ErrorCode.INVALID_MESSAGE, "connections from other users are refused"))
                return
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write, connection, nursery.cancel_scope)
                await self._read(connection)
        except Exception:
            log.exception("connection %d failed", connection.id)
        finally:
            self._connections.discard(connection)
            if self.fanout is not None:
                self.fanout.drop(connection)
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await _linger(stream)
                await stream.aclose()

    async def _write(self, connection: Connection, scope: trio.CancelScope) -> None:
        try:
            await connection.run_writer()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        # The writer only ends when the client is gone or the outbox was closed: either
        # way the connection is over.
        scope.cancel()

    async def _read(self, connection: Connection) -> None:
        decoder = Decoder(self.max_frame)
        limiter = trio.Semaphore(REQUESTS_PER_CONNECTION)
        async with trio.open_nursery() as answers:
            while True:
                try:
                    data = await connection.stream.receive_some(READ_SIZE)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    break
                if not data:
                    break
                try:
                    messages = decoder.feed(data)
                except ProtocolError as exc:
                    log.info("connection %d: %s", connection.id, exc)
                    await connection.send(_error_note(exc.code, str(exc)))
                    break
                for message in messages:
                    # Looked up per request: the daemon switches from answering without a
                    # database to serving once it opens.
                    api = self.api
                    assert api is not None
                    if isinstance(message, Request) and message.method in _INLINE:
                        # Quick methods are answered in the reader: a task per request would
                        # cost a scheduler pass on every round trip.
                        await connection.send(await api.answer(connection, message))
                    elif isinstance(message, Request):
                        refusal = api.refusal(message)  # so are refusals known at once
                        if refusal is not None:
                            await connection.send(refusal)
                            continue
                        await limiter.acquire()
                        answers.start_soon(self._answer, connection, api, message, limiter)
                    elif isinstance(message, ProtocolError):
                        await connection.send(_invalid(message))
                    elif isinstance(message, Response):
                        log.info("connection %d: ignored a response (msgid %d)", connection.id, message.msgid)
        # Every answer is queued; the writer sends them and then ends.
        connection.close_outbox()

    async def _answer(
        self, connection: Connection, api: Api | Unavailable, request: Request, limiter: trio.Semaphore
    ) -> None:
        try:
            await connection.send(await api.answer(connection, request))
        finally:
            limiter.release()


async def _linger(stream: trio.SocketStream) -> None:
    # Closing with unread input makes the kernel reset the connection, and the client can
    # lose the last thing we sent (the error that explains the close). So: end our side,
    # read what the client still sends until it closes, then close.
    try:
        await stream.send_eof()
        while await stream.receive_some(65536):
            pass
    except (trio.BrokenResourceError, trio.ClosedResourceError, trio.BusyResourceError):
        pass


def _invalid(error: ProtocolError) -> bytes:
    msgid = getattr(error, "msgid", None)
    if msgid is not None:
        return encode(Response(msgid, RpcError(error.code, str(error)).to_wire(), None))
    return _error_note(error.code, str(error))


def _error_note(code: int, message: str) -> bytes:
    return encode(Notification("error", [RpcError(code, message).to_wire()]))


def _peer_uid(stream: trio.SocketStream) -> int | None:
    credentials = peer_credentials(stream.socket)
    # None without SO_PEERCRED (macOS, BSD): the socket's private folder keeps others out.
    return None if credentials is None else credentials[1]


def _acquire_lock(socket_path: Path) -> IO[str]:
    # The socket's folder may be one the user named (ROOST_SOCKET): checked, not tightened.
    check_private_dir(os.fspath(socket_path.parent))
    lock = open(socket_path.with_name(socket_path.name + ".lock"), "a+", opener=private_opener)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        pid = lock.read().strip()
        lock.close()
        raise AlreadyRunning(f"a roost daemon (pid {pid or '?'}) already serves {socket_path}") from None
    lock.seek(0)
    lock.truncate()
    lock.write(str(os.getpid()))
    lock.flush()
    return lock


def _activated_socket() -> stdsocket.socket | None:
    """The listening Unix socket systemd passed (fd 3), if this process was socket-activated."""
    if os.environ.get("LISTEN_PID") != str(os.getpid()) or not os.environ.get("LISTEN_FDS"):
        return None
    # Ours alone: tool processes must not think they were activated too.
    for variable in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        os.environ.pop(variable, None)
    sock = stdsocket.socket(fileno=3)
    if sock.family != stdsocket.AF_UNIX or sock.type != stdsocket.SOCK_STREAM:
        sock.detach()
        raise RuntimeError("LISTEN_FDS: fd 3 is not a Unix stream socket")
    return sock


async def _listen(path: Path) -> trio.SocketListener:
    # Only the lock holder gets here, so a socket file left behind is stale.
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        await sock.bind(os.fspath(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    # Room for many clients connecting at once (the kernel caps it at net.core.somaxconn).
    sock.listen(1024)
    return trio.SocketListener(sock)


def default_database() -> Path:
    """The database file in the user state dir."""
    return state_dir() / "roost.db"


def _socket_files(socket: str) -> list[str]:
    """This daemon's socket and the default one (a client's ``roost --host`` keeps its ssh
    connections beside the socket it uses), each with its lock, its ledger and the folder
    of ssh's control sockets: through any of them a command could act outside."""
    files: list[str] = []
    for path in dict.fromkeys((socket, default_socket_path())):
        files += [path, path + ".lock", path + ".tools", os.path.join(os.path.dirname(path), "ssh")]
    return files
