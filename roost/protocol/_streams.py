"""The byte streams the blocking client talks over: a Unix socket, or a child's pipes.

Design: the client needs little of its connection, so it names that little in the socket
vocabulary (:class:`Stream`: ``sendall``, ``recv``, a timeout, ``close``) and takes any
object that has it. A connected Unix socket is one (:class:`SocketStream`); a child
process is the other (:class:`ProcessStream`): ``ssh HOST roost bridge``, whose stdin
carries our bytes to the remote daemon and whose stdout carries its bytes back. What the
child says on stderr is kept (its last lines) to say why the stream ended, never printed:
its output is not the person's terminal's.

Stdlib only; ``subprocess`` is imported when a child is started, so that the CLI does not
pay for it on the local path.
"""

from __future__ import annotations

import _socket
import os
import select
import struct
import time
from typing import IO, TYPE_CHECKING, Protocol, Sequence

from ._errors import Timeout
from ._private import check_peer

if TYPE_CHECKING:
    import subprocess

#: Bytes of the child's stderr kept to explain its end.
_STDERR_TAIL = 4096
#: Seconds a closed child may take to end by itself before it is killed.
_EXIT_WAIT = 1.0


class Stream(Protocol):
    """A connected, full-duplex byte stream to a daemon (what :class:`Client` wraps).

    ``recv`` returns ``b""`` at the end of the stream; ``sendall`` and ``recv`` raise
    ``TimeoutError`` when the timeout set with ``settimeout`` passes with no progress
    (``BlockingIOError`` with a timeout of 0), and ``BrokenPipeError`` or
    ``ConnectionResetError`` when the other end is gone.
    """

    #: Where the stream leads, for messages: a socket path, an ``ssh://`` URL.
    where: str

    def sendall(self, data: bytes, /) -> None: ...

    def recv(self, size: int, /) -> bytes: ...

    def settimeout(self, timeout: float | None, /) -> None: ...

    def gettimeout(self) -> float | None: ...

    def fileno(self) -> int: ...

    def close(self) -> None: ...

    def ended(self) -> str:
        """Why the stream ended, in words (after ``recv`` returned ``b""``)."""
        ...


class SocketStream:
    """A connected Unix socket as a :class:`Stream`.

    Design: the socket stays blocking and its timeout is the kernel's (``SO_RCVTIMEO``,
    ``SO_SNDTIMEO``), not Python's: a socket with a Python timeout is non-blocking and polls
    before every read, which made a round trip with the daemon ~20 µs (a third) slower. The
    timeout the socket had when given is kept.
    """

    def __init__(self, sock: _socket.socket, where: str) -> None:
        #: The socket itself (blocking; set its timeout here, with :meth:`settimeout`).
        self.socket = sock
        self.where = where
        self._timeout: float | None = None
        timeout = sock.gettimeout()
        sock.settimeout(None)
        self.settimeout(timeout)
        self.fileno = sock.fileno
        self.close = sock.close

    def settimeout(self, timeout: float | None, /) -> None:
        # A zeroed timeval means no timeout: 0 is a read that does not wait (MSG_DONTWAIT),
        # and anything shorter than the timeval's microsecond is one microsecond.
        wait = 0.0 if timeout is None or timeout <= 0 else max(timeout, 1e-6)
        value = _TIMEVAL.pack(int(wait), int(wait % 1 * 1_000_000))
        self.socket.setsockopt(_socket.SOL_SOCKET, _socket.SO_RCVTIMEO, value)
        self.socket.setsockopt(_socket.SOL_SOCKET, _socket.SO_SNDTIMEO, value)
        self._timeout = timeout

    def gettimeout(self) -> float | None:
        return self._timeout

    def recv(self, size: int, /) -> bytes:
        timeout = self._timeout
        if timeout is not None and timeout <= 0:
            return self.socket.recv(size, _socket.MSG_DONTWAIT)
        try:
            return self.socket.recv(size)
        except BlockingIOError:  # the kernel's timeout passed
            raise TimeoutError("no bytes in time") from None

    def sendall(self, data: bytes, /) -> None:
        try:
            self.socket.sendall(data)
        except BlockingIOError:
            raise TimeoutError("the connection took no bytes in time") from None

    def ended(self) -> str:
        return "the daemon closed the connection"


#: A ``struct timeval``: seconds and microseconds, each a C long.
_TIMEVAL = struct.Struct("ll")


def connect_unix(path: str, timeout: float | None) -> SocketStream:
    """Connect to the daemon's socket at ``path``; the process serving it must be ours.

    Raises:
        OSError: nothing listens there (``FileNotFoundError``, ``ConnectionRefusedError``).
        NotPrivate: a process of another user serves the socket.
        Timeout: the daemon does not accept the connection within ``timeout`` seconds.
    """
    # The C socket type, not the socket module: the client needs only its methods, and
    # `import socket` (selectors, enums of every constant) costs ~2 ms of each command's start.
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        _connect(sock, path, timeout)
        check_peer(sock, path)
    except BaseException:
        sock.close()
        raise
    return SocketStream(sock, path)


def _connect(sock: _socket.socket, where: str, timeout: float | None) -> None:
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


class ProcessStream:
    """A child process's stdin and stdout as a :class:`Stream`.

    The child runs in a session of its own: a Ctrl-C at the terminal interrupts this
    process (which may still want to send an ``abort``), not the connection. So it has no
    terminal to ask a person anything on (``ssh`` runs with ``BatchMode``).

    Error handling:
        The child's stderr is read whenever the stream waits (so a talkative child never
        blocks on it) and its last 4 KiB kept; :meth:`ended` reports them with the exit
        status once stdout has ended.

    Resource handling:
        Owns the child and its three pipes. :meth:`close` closes stdin (the child sees the
        end of its input and can finish cleanly), waits up to a second, then kills it.
    """

    def __init__(self, argv: Sequence[str], where: str) -> None:
        import subprocess  # only remote connections pay for it

        self.where = where
        self._timeout: float | None = None
        self._tail = bytearray()
        self._process: subprocess.Popen[bytes] = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
            close_fds=True,
            start_new_session=True,
        )
        stdin, stdout, stderr = self._process.stdin, self._process.stdout, self._process.stderr
        assert stdin is not None and stdout is not None and stderr is not None  # all PIPE
        self._stdin: IO[bytes] = stdin
        self._stdout: IO[bytes] = stdout
        self._stderr: IO[bytes] | None = stderr
        for pipe in (stdin, stderr):
            os.set_blocking(pipe.fileno(), False)

    @property
    def pid(self) -> int:
        """The child's pid."""
        return int(self._process.pid)

    def settimeout(self, timeout: float | None) -> None:
        self._timeout = timeout

    def gettimeout(self) -> float | None:
        return self._timeout

    def fileno(self) -> int:
        return self._stdout.fileno()

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        fd = self._stdin.fileno()
        while view:
            try:
                sent = os.write(fd, view)
            except BlockingIOError:
                sent = 0
            view = view[sent:]
            if view and not self._wait(fd, writing=True):
                raise TimeoutError("the connection took no bytes in time")

    def recv(self, size: int) -> bytes:
        fd = self._stdout.fileno()
        if not self._wait(fd, writing=False):
            if self._timeout == 0:
                raise BlockingIOError("no bytes yet")
            raise TimeoutError("no bytes in time")
        return os.read(fd, size)

    def ended(self) -> str:
        """Why the connection ended: the child's last words and its exit status."""
        return ended_message(self.where, self.last_words(), self.wait_exit())

    def last_words(self) -> str:
        """The last lines the child wrote on stderr, in one line."""
        self._drain_stderr()
        return last_lines(self._tail)

    def wait_exit(self) -> int | None:
        """The child's exit status, after giving it a moment to end (its stdout has just
        ended); None if it runs on."""
        try:
            return int(self._process.wait(0.5))
        except Exception:  # subprocess.TimeoutExpired
            return None

    @property
    def exit_status(self) -> int | None:
        """The child's exit status once it has ended (a signal: its negative number)."""
        return self._process.poll()

    @property
    def stderr_tail(self) -> str:
        """The last of what the child wrote on stderr."""
        self._drain_stderr()
        return self._tail.decode(errors="replace")

    def close(self) -> None:
        """End the child (see the class); safe to call twice."""
        for pipe in (self._stdin, self._stdout):
            try:
                pipe.close()
            except OSError:
                pass
        try:
            self._process.wait(_EXIT_WAIT)
        except Exception:  # subprocess.TimeoutExpired
            self._process.kill()
            self._process.wait()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def _wait(self, fd: int, *, writing: bool) -> bool:
        """Wait until ``fd`` is ready (reading stderr meanwhile); False at the timeout."""
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            readers = [self._stderr.fileno()] if self._stderr is not None else []
            if writing:
                ready_r, ready_w, _ = select.select(readers, [fd], [], left)
                if ready_w:
                    return True
            else:
                ready_r, _, _ = select.select([fd, *readers], [], [], left)
                if fd in ready_r:
                    return True
            if ready_r:
                self._drain_stderr()
            elif deadline is not None and time.monotonic() >= deadline:
                return False

    def _drain_stderr(self) -> None:
        if self._stderr is None:
            return
        while True:
            try:
                chunk = os.read(self._stderr.fileno(), 65536)
            except BlockingIOError:
                return
            if not chunk:
                self._stderr.close()
                self._stderr = None
                return
            self._tail += chunk
            del self._tail[:-_STDERR_TAIL]


def last_lines(tail: bytes | bytearray) -> str:
    """A child's last words (the end of its stderr) in one line: its last three lines.
    ssh's own warnings come first; the last lines say what went wrong."""
    said = [line.strip() for line in bytes(tail).decode(errors="replace").splitlines()]
    return "; ".join([line for line in said if line][-3:])


def ended_message(where: str, last_words: str, status: int | None) -> str:
    """Why a connection through a child process ended, in words."""
    message = f"lost the connection to {where}" + (f": {last_words}" if last_words else "")
    return message + (f" (exit status {status})" if status is not None else "")
