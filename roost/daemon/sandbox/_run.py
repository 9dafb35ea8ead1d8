"""A run's sandbox: built once, at the run's first command, with the spawner inside.

Building a bubblewrap sandbox costs ~4 ms and starting its spawner's interpreter ~7 ms; a
command started by a spawner that is already running costs a fraction of a millisecond
more than one started by the daemon itself. So a run's commands (its bash calls, its exec
check, its project's hooks) share one sandbox, :class:`RunSandbox`, which is built at the
first of them (a run that runs none never builds one) and ended with the run. Runs never
share one, even in one folder: each has its own private ``/tmp``.

The daemon talks to the spawner (``_spawner``, whose protocol is described there) over a
socket pair: a control socket to ask for a command, and a socket per command, which
carries its answers (started, failed, exited) and the daemon's kill. The command's stdin,
stdout and stderr are pipes the daemon makes and reads as it reads an unsandboxed
command's; their other ends are passed to the spawner with the request.

Error handling:
    A sandbox that cannot be built (no bwrap, a kernel that forbids it, an interpreter the
    sandbox cannot see) raises :class:`SandboxUnavailable` at the spawn that needed it, with
    a message naming the reason and the way out, and tells the run (``on_failure``): it ends
    ``error``. Nothing runs unsandboxed instead. A sandbox that ends before its run (a
    command killed the spawner: ``kill -9 -1``) is built again at the next command, once;
    the commands that ran in it are reported killed. A spawner that does not answer, or
    does not end a command it was told to kill, is killed with its whole sandbox.

Resource handling:
    :meth:`RunSandbox.aclose` (``async with``) tells the spawner to stop, then kills
    bwrap's process group after :data:`STOP_GRACE`: every process of the sandbox ends with
    it (they live in its pid namespace). bwrap runs with ``--die-with-parent``: a daemon
    that is killed leaves no sandbox behind; its group is in the process ledger too.
"""

from __future__ import annotations

import array
import errno
import functools
import logging
import marshal
import math
import os
import signal
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Awaitable, Callable, Mapping, Protocol, Sequence

import trio

from ._policy import SandboxPolicy
from ._sandbox import Confinement, SandboxUnavailable

log = logging.getLogger(__name__)

#: How long building the sandbox and starting the spawner may take.
START_TIMEOUT = 10.0
#: How long the spawner may take to say a command started.
ANSWER_TIMEOUT = 10.0
#: How long a command may take to end once it was killed, before the whole sandbox is.
KILL_GRACE = 2.0
#: How long the spawner may take to stop before bwrap's process group is killed.
STOP_GRACE = 1.0
#: How many times a sandbox that ended before its run is built again.
RESTARTS = 1
#: The largest request (argv and environment) the control socket carries: its send
#: buffer is asked for this much (the kernel gives at most twice ``net.core.wmem_max``).
MAX_REQUEST = 1 << 20
#: What the spawner's interpreter runs: the spawner's code, compiled by the daemon (once)
#: and read from its stdin. So the roost package need not be visible inside the sandbox,
#: only the interpreter and its standard library; nothing is compiled at each start (3 ms).
BOOT = "import marshal, sys; exec(marshal.loads(sys.stdin.buffer.read()))"
#: The interpreter the spawner runs on: the daemon's own, where it really lies (a virtual
#: environment's python is a link to it; with -I -S it needs only its own stdlib), which
#: sandbox_paths keeps readable wherever the sandbox would hide it.
INTERPRETER = os.path.realpath(sys.executable)


class Ledger(Protocol):
    """Where process groups in flight are recorded (``tools.ProcessLedger``)."""

    def add(self, pid: int) -> None: ...

    def remove(self, pid: int) -> None: ...


class RunSandbox:
    """One run's sandbox: the spawner inside, built at the first :meth:`spawn`.

    Args:
        confinement: the run's policy and the daemon's sandbox.
        cwd: the run's folder (in ``read-only`` mode it is mounted read-only).
        ledger: records bwrap's process group while it runs.
        on_failure: told, once, why the sandbox cannot be had (the run must end), before
            the spawn that needed it raises.
        shown: files of the daemon's own its commands may read (the session's transcript,
            which the daemon's folders hidden from them hold), read-only.
    """

    def __init__(
        self,
        confinement: Confinement,
        cwd: str,
        *,
        ledger: Ledger | None = None,
        on_failure: Callable[[str], Awaitable[None]] | None = None,
        shown: tuple[str, ...] = (),
    ) -> None:
        self.confinement = confinement
        self._shown = shown
        self.cwd = cwd
        self._ledger = ledger
        self._on_failure = on_failure
        self._box: _Box | None = None
        self._building = trio.Lock()
        self._restarts = RESTARTS
        self._failed: str | None = None
        self._closed = False

    @property
    def policy(self) -> SandboxPolicy:
        """What the run's commands may do."""
        return self.confinement.policy

    @property
    def pid(self) -> int | None:
        """bwrap's pid (the leader of its process group) while the sandbox is built."""
        return self._box.popen.pid if self._box is not None else None

    def fits(self, confinement: Confinement) -> bool:
        """Whether commands held by ``confinement`` may run here (a sub-agent's): the same
        sandbox, the same mounts and network."""
        return confinement.sandbox is self.confinement.sandbox and _mounted(confinement.policy) == _mounted(self.policy)

    def explain(self, output: str, status: int, cwd: str) -> str | None:
        """See :meth:`Confinement.explain`."""
        return self.confinement.explain(output, status, cwd)

    async def __aenter__(self) -> RunSandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def spawn(
        self, argv: Sequence[str], *, cwd: str, env: Mapping[str, str], stdin: bool = False, stderr: bool = False
    ) -> SandboxedProcess:
        """Start ``argv`` in the sandbox, in ``cwd`` with ``env``, in a session of its own.

        Its stdin is /dev/null, or with ``stdin`` a pipe (:attr:`SandboxedProcess.stdin`);
        its stdout and stderr come together on :attr:`SandboxedProcess.stdout`, or with
        ``stderr`` apart.

        Raises:
            SandboxUnavailable: the sandbox cannot be built (the run was told), ended before
                the request reached it, or did not answer (it was killed).
            OSError: the command cannot be started (no such program, no such folder).
            ValueError: a NUL in ``argv``, ``cwd`` or ``env``.
        """
        if any("\0" in s for s in (*argv, cwd, *env, *env.values())):
            raise ValueError("embedded null byte")  # as Popen says it
        request = marshal.dumps(("spawn", list(argv), cwd, self.confinement.env(env)))
        box = await self._build()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setblocking(False)
        stdio = _Stdio(stdin, stderr)
        try:
            try:
                await _send(box.control, request, [theirs.fileno(), *stdio.theirs])
            except OSError as exc:
                if exc.errno == errno.EMSGSIZE:
                    raise OSError(errno.E2BIG, "the command and its environment are too large", argv[0]) from None
                raise SandboxUnavailable("the run's sandbox ended before the command could start") from None
            finally:
                theirs.close()
                stdio.close_theirs()
            with trio.move_on_after(ANSWER_TIMEOUT):
                said = await _receive(ours)
                if said.startswith(b"failed "):
                    number, _, name = said[7:].partition(b" ")
                    code = int(number)
                    raise OSError(code, os.strerror(code), os.fsdecode(name))
                # Nothing said: the sandbox ended as the command started (the command may
                # have ended it: kill -9 -1). It is reported killed, with what it wrote.
                return SandboxedProcess(self, box, ours, int(said[8:]) if said.startswith(b"started ") else 0, stdio)
            self.kill()
            raise SandboxUnavailable(f"the run's sandbox did not answer within {ANSWER_TIMEOUT:g} s; it was ended")
        except BaseException:
            ours.close()
            stdio.close_ours()
            raise

    def kill(self) -> None:
        """Kill the whole sandbox now (every process in it); the next command builds it
        again (once)."""
        if self._box is not None:
            self._box.lost = True
            self._box.kill()

    async def aclose(self) -> None:
        """End the sandbox: the spawner stops, then bwrap's group is killed. Idempotent."""
        self._closed = True
        box, self._box = self._box, None
        if box is not None:
            await self._end(box, stop=True)

    async def _build(self) -> _Box:
        """The sandbox, built now if need be (again, once, if it ended)."""
        async with self._building:
            if self._failed is not None:
                raise SandboxUnavailable(self._failed)
            if self._closed:
                raise SandboxUnavailable("the run has ended")
            box = self._box
            if box is not None and box.alive():
                return box
            if box is not None:
                self._box = None
                await self._end(box, stop=False)
                if self._restarts == 0:
                    raise await self._fail("it ended twice during the run (a command may have killed every process it could)")
                self._restarts -= 1
                log.warning("the sandbox of a run in %s ended before the run; building it again", self.cwd)
            try:
                confinement = self.confinement
                if self._shown:
                    policy = confinement.policy
                    confinement = replace(confinement, policy=replace(policy, readable=(*policy.readable, *self._shown)))
                argv = confinement.argv([INTERPRETER, "-I", "-S", "-c", BOOT], self.cwd)
                self._box = await _Box.start(argv)
            except SandboxUnavailable as exc:
                raise await self._fail(str(exc)) from None
            if self._ledger is not None:
                self._ledger.add(self._box.popen.pid)
            return self._box

    async def _fail(self, reason: str) -> SandboxUnavailable:
        """The run cannot have its sandbox: say so, once, and why, and the way out."""
        self._failed = (
            f"the sandbox cannot start: {reason}. This run's commands run only inside it; to run them "
            'without one, dispatch with --sandbox off, or set [sandbox] mode = "off" in config.toml'
        )
        if self._on_failure is not None:
            await self._on_failure(self._failed)
        return SandboxUnavailable(self._failed)

    async def _end(self, box: _Box, *, stop: bool) -> None:
        """End ``box`` (see :meth:`_Box.end`) and forget its group."""
        await box.end(stop=stop)
        if self._ledger is not None:
            self._ledger.remove(box.popen.pid)


class SandboxedProcess:
    """A command running in a run's sandbox: the same surface as an unsandboxed one
    (``tools._spawn.Spawned``).

    Resource handling: :attr:`stdin`, :attr:`stdout` and :attr:`stderr` are the caller's
    to close; :meth:`wait` closes the command's socket.
    """

    def __init__(self, sandbox: RunSandbox, box: _Box, sock: socket.socket, pid: int, stdio: _Stdio) -> None:
        self._sandbox = sandbox
        self._box = box
        self._sock = sock
        self._killed = False
        #: Its pid in the sandbox's pid namespace, not this machine's (0: unknown, the
        #: sandbox ended as it started).
        self.pid = pid
        self.stdin, self.stdout, self.stderr = stdio.streams()
        #: The exit status once :meth:`wait` has seen it (negative: killed by that signal).
        self.returncode: int | None = None

    async def wait(self) -> int:
        """Wait for the command to exit; its status. Cancellable; once the command was
        killed, bounded (:data:`KILL_GRACE`, then the whole sandbox is killed)."""
        if self.returncode is not None:
            return self.returncode
        said = b""
        with trio.move_on_after(KILL_GRACE if self._killed else math.inf) as scope:
            said = await _receive(self._sock)
        if scope.cancelled_caught:
            log.warning("a sandboxed command did not end when killed: its run's sandbox is killed")
            self._box.kill()
        if said.startswith(b"exited "):
            self.returncode = int(said[7:])
        else:
            # The spawner is gone (or was killed), and the command with the sandbox.
            self._box.lost = True
            self.returncode = -signal.SIGKILL
        self._sock.close()
        return self.returncode

    def kill(self) -> None:
        """Kill the command's process group (what it left elsewhere in the sandbox ends
        once no other command runs there)."""
        if self.returncode is not None or self._killed:
            return
        self._killed = True
        try:
            self._sock.send(b"kill %d" % signal.SIGKILL)
        except OSError:
            pass  # the spawner is gone, and the command with it


class _Box:
    """bwrap running the spawner, and the daemon's end of the control socket."""

    def __init__(self, popen: subprocess.Popen[bytes], control: socket.socket) -> None:
        self.popen = popen
        self.control = control
        #: Its spawner is known to be gone (bwrap may not have exited yet).
        self.lost = False
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(popen.pid)
        except (OSError, AttributeError):
            pass  # no pidfds: wait() polls

    @classmethod
    async def start(cls, argv: list[str]) -> _Box:
        """Run ``argv`` (bwrap, then the spawner) and wait until the spawner is ready.

        Raises:
            SandboxUnavailable: it did not start (bwrap's own words, if it said any).
        """
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setblocking(False)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MAX_REQUEST)
        source, source_in = os.pipe()
        errors, errors_in = os.pipe()
        try:
            # It fits in the pipe's buffer: written before the spawner reads it.
            os.write(source_in, _spawner_code())
            # From the event loop's thread: --die-with-parent watches the thread that
            # started bwrap, which must live as long as the daemon.
            popen = subprocess.Popen(
                [*argv, str(theirs.fileno())],
                stdin=source,
                stdout=subprocess.DEVNULL,
                stderr=errors_in,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                env={},
            )
        except OSError as exc:
            ours.close()
            os.close(errors)
            raise SandboxUnavailable(f"{argv[0]} did not run: {exc}") from None
        finally:
            theirs.close()
            for fd in (source, source_in, errors_in):
                os.close(fd)
        box = cls(popen, ours)
        try:
            said = b""
            with trio.move_on_after(START_TIMEOUT):
                said = await _receive(ours)
            if said != b"ready":
                await box.end()
                raise SandboxUnavailable(_why(errors, said, popen.returncode))
        except BaseException:
            await box.end()  # cancelled meanwhile: nothing of it is left running
            raise
        finally:
            os.close(errors)
        return box

    def alive(self) -> bool:
        return not self.lost and self.popen.poll() is None

    def kill(self) -> None:
        """SIGKILL bwrap's group: the sandbox's pid 1 dies, and every process in it."""
        self.lost = True
        if self.popen.returncode is None:
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    async def wait(self) -> None:
        """Wait for bwrap to exit (and reap it). Cancellable."""
        while self.popen.poll() is None:
            if self._pidfd is not None:
                await trio.lowlevel.wait_readable(self._pidfd)
            else:
                await trio.sleep(0.01)

    async def end(self, *, stop: bool = False) -> None:
        """End the sandbox (asking the spawner to stop first, with ``stop``), bounded and
        shielded, and close what the daemon holds of it. Idempotent."""
        with trio.CancelScope(shield=True):
            if stop and self.alive():
                try:
                    self.control.send(marshal.dumps(("stop",)))
                except OSError:
                    pass  # gone already
                with trio.move_on_after(STOP_GRACE):
                    await self.wait()
            self.kill()
            with trio.move_on_after(STOP_GRACE):
                await self.wait()
        if self.popen.returncode is None:
            log.warning("bwrap (pid %d) did not end when killed", self.popen.pid)
        self.control.close()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


class _Stdio:
    """A command's stdin, stdout and stderr: pipes whose far ends go to the spawner."""

    def __init__(self, stdin: bool, stderr: bool) -> None:
        self._ours: list[int | None] = [None, None, None]
        self.theirs: list[int] = []
        try:
            if stdin:
                read, self._ours[0] = os.pipe()
                self.theirs.append(read)
            else:
                self.theirs.append(os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC))
            self._ours[1], write = os.pipe()
            self.theirs.append(write)
            if stderr:
                self._ours[2], write = os.pipe()
            self.theirs.append(write)
        except BaseException:
            self.close_theirs()
            self.close_ours()
            raise

    def streams(self) -> tuple[trio.lowlevel.FdStream | None, trio.lowlevel.FdStream, trio.lowlevel.FdStream | None]:
        """Our ends as streams (theirs are closed by now); the caller closes them."""
        stdin, stdout, stderr = (trio.lowlevel.FdStream(fd) if fd is not None else None for fd in self._ours)
        assert stdout is not None
        self._ours = [None, None, None]
        return stdin, stdout, stderr

    def close_theirs(self) -> None:
        for fd in dict.fromkeys(self.theirs):
            os.close(fd)
        self.theirs = []

    def close_ours(self) -> None:
        for fd in self._ours:
            if fd is not None:
                os.close(fd)
        self._ours = [None, None, None]


async def _send(sock: socket.socket, data: bytes, fds: list[int]) -> None:
    """Send one message with ``fds`` attached, waiting for room if need be."""
    while True:
        try:
            sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
            return
        except BlockingIOError:
            await trio.lowlevel.wait_writable(sock)


async def _receive(sock: socket.socket) -> bytes:
    """The next message (``b""``: the other end closed)."""
    while True:
        try:
            return sock.recv(256)
        except BlockingIOError:
            await trio.lowlevel.wait_readable(sock)
        except ConnectionResetError:
            return b""


def _why(errors: int, said: bytes, status: int | None) -> str:
    """Why a sandbox did not start: bwrap's last words, else what is known."""
    os.set_blocking(errors, False)
    words = b""
    try:
        while len(words) < 65536 and (chunk := os.read(errors, 65536)):
            words += chunk
    except BlockingIOError:
        pass
    lines = words.decode(errors="replace").strip().splitlines()
    if lines:
        return lines[-1]
    if status is None:
        return f"it did not start within {START_TIMEOUT:g} s" if not said else "it did not start"
    return f"it exited with status {status}"


@functools.cache
def _spawner_code() -> bytes:
    """The spawner's code object, marshalled (for this very interpreter)."""
    path = Path(__file__).with_name("_spawner.py")
    return marshal.dumps(compile(path.read_bytes(), str(path), "exec"))


def _mounted(policy: SandboxPolicy) -> SandboxPolicy:
    """What of ``policy`` makes its sandbox: not what was ignored, nor auto_allow."""
    return replace(policy, ignored=(), auto_allow=False)
