"""The spawner: the one program a run's sandbox starts, which starts each of the run's commands.

It runs inside the sandbox in the daemon's interpreter (``python -I -S -c BOOT FD``), which
reads its code, compiled by the daemon, from its stdin: nothing but the interpreter and its
standard library needs to be visible there. It imports only modules written in C, so that
it starts in a few milliseconds. It never looks at what a command says; it only starts, signals and
reaps, as the daemon asks.

Protocol: AF_UNIX ``SOCK_SEQPACKET`` sockets (one message per packet).

- The control socket (inherited, fd ``FD``). The spawner says ``b"ready"`` once it is set
  up. The daemon sends ``marshal`` tuples: ``("spawn", argv, cwd, env)`` with four
  descriptors (``SCM_RIGHTS``): the command's own socket, then its stdin, stdout and
  stderr; ``("stop",)``: end every command and exit. The control socket closed is a stop.
- A command's own socket. The spawner says ``b"started PID"`` (its pid in the sandbox) or
  ``b"failed ERRNO NAME"`` (the program or the folder ``NAME`` could not be used), then
  ``b"exited STATUS"`` (negative: killed by that signal, as ``Popen.returncode``). The
  daemon may send ``b"kill SIGNAL"`` (to the command's process group); closing the socket
  kills the group.

Each command runs in its own session (so its own process group), in its own folder and
environment, with no descriptor beyond 0-2 (every descriptor of the spawner is
close-on-exec). When a command's first process exits, what it left in its group is killed;
when no command is left running, so is every other process of the sandbox (those that
left their group): processes a command starts end with it, as they did when each command
had a sandbox of its own.

The spawner cannot be reached by the commands: it makes itself non-dumpable, so that
processes of the same user (and without ``CAP_SYS_PTRACE``: the sandbox drops every
capability) can neither open ``/proc/<spawner>/fd/N`` nor trace it; signals that ``kill``
and ``pkill`` send by default are caught and ignored (a handler, unlike ``SIG_IGN``, is not
inherited by the commands).
"""

import marshal
import os
import select
import sys
import _signal  # type: ignore[import-not-found]  # no stubs; signal would import enum (4 ms)
import _socket

#: prctl(2): whether the process may be dumped, traced, or have its /proc files opened.
PR_SET_DUMPABLE = 4
#: The largest request (argv and environment) the daemon can send: the most its socket's
#: send buffer holds (twice ``net.core.wmem_max``, 416 KiB by default).
MAX_REQUEST = 1 << 20
#: Signals a command may send to every process it sees (``kill -TERM -1``, ``pkill``).
IGNORED = (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP, _signal.SIGQUIT, _signal.SIGUSR1, _signal.SIGUSR2)


def main(control_fd: int) -> None:
    """Serve the daemon on ``control_fd`` until it says stop or goes away."""
    _undumpable()
    for signum in IGNORED:
        _signal.signal(signum, _caught)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    _signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    _signal.signal(_signal.SIGCHLD, _caught)
    os.set_inheritable(control_fd, False)
    control = _socket.socket(fileno=control_fd)
    poller = select.poll()
    poller.register(control_fd, select.POLLIN)
    poller.register(wake_read, select.POLLIN)
    spawner = _Spawner(poller)
    control.send(b"ready")
    while True:
        for fd, _ in poller.poll():
            if fd == control_fd:
                if not spawner.request(control):
                    spawner.stop()
                    return
            elif fd == wake_read:
                while True:
                    try:
                        os.read(wake_read, 512)
                    except BlockingIOError:
                        break
                spawner.reap()
            else:
                spawner.from_daemon(fd)


class _Spawner:
    def __init__(self, poller: select.poll) -> None:
        self.poller = poller
        self.buffer = bytearray(MAX_REQUEST)
        #: Commands running: their socket by the pid of their first process (None: the
        #: daemon closed it), and their pid by their socket's descriptor.
        self.sockets: dict[int, _socket.socket | None] = {}
        self.pids: dict[int, int] = {}

    def request(self, control: _socket.socket) -> bool:
        """Serve one request; False: stop."""
        size, ancillary, flags, _ = control.recvmsg_into([self.buffer], _socket.CMSG_SPACE(16), _socket.MSG_CMSG_CLOEXEC)
        fds: list[int] = []
        for level, kind, payload in ancillary:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                fds += [int.from_bytes(payload[i : i + 4], sys.byteorder) for i in range(0, len(payload) - 3, 4)]
        if not size:
            return False
        whole = not flags & (_socket.MSG_TRUNC | _socket.MSG_CTRUNC)
        message = marshal.loads(memoryview(self.buffer)[:size]) if whole else None
        if message == ("stop",):
            return False
        if message is None or len(fds) != 4 or message[0] != "spawn":
            for fd in fds:
                os.close(fd)
            return True
        sock = _socket.socket(fileno=fds[0])
        try:
            pid = _start(message[1], message[2], message[3], fds[1:])
        except (OSError, ValueError, TypeError) as exc:
            failed = exc if isinstance(exc, OSError) else OSError(22, str(exc))
            name = failed.filename if isinstance(failed.filename, str) else ""
            sock.send(b"failed %d %s" % (failed.errno or 22, os.fsencode(name)))
            sock.close()
            return True
        finally:
            for fd in fds[1:]:
                os.close(fd)
        sock.send(b"started %d" % pid)
        self.sockets[pid] = sock
        self.pids[sock.fileno()] = pid
        self.poller.register(sock.fileno(), select.POLLIN)
        return True

    def from_daemon(self, fd: int) -> None:
        """A kill from the daemon, or its socket closed: the command's group is killed."""
        pid = self.pids[fd]
        sock = self.sockets[pid]
        assert sock is not None, "registered while open"
        try:
            said = sock.recv(64)
        except OSError:
            said = b""
        if said.startswith(b"kill "):
            _killpg(pid, int(said[5:]))
            return
        self.poller.unregister(fd)
        del self.pids[fd]
        sock.close()
        self.sockets[pid] = None
        _killpg(pid, _signal.SIGKILL)

    def reap(self) -> None:
        """Reap the commands that exited, and tell the daemon how."""
        while True:
            try:
                exited = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                break
            if exited is None:
                break
            pid = exited.si_pid
            # Before reaping: until then the pid is the group's, never another process's.
            _killpg(pid, _signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            sock = self.sockets.pop(pid, None)
            if sock is not None:
                self.poller.unregister(sock.fileno())
                del self.pids[sock.fileno()]
                try:
                    sock.send(b"exited %d" % os.waitstatus_to_exitcode(status))
                except OSError:
                    pass
                sock.close()
        if not self.sockets:
            _kill_the_rest()

    def stop(self) -> None:
        for pid in self.sockets:
            _killpg(pid, _signal.SIGKILL)
        _kill_the_rest()


def _start(argv: list[str], cwd: str, env: dict[str, str], stdio: list[int]) -> int:
    """Start ``argv`` in ``cwd`` with ``env`` and ``stdio`` (its stdin, stdout and stderr) in
    a new session; its pid."""
    os.chdir(cwd)  # a single thread: the folder stays until the command has started
    program = _which(argv[0], env.get("PATH"))
    return os.posix_spawn(
        program,
        argv,
        env,
        file_actions=[(os.POSIX_SPAWN_DUP2, fd, target) for target, fd in enumerate(stdio)],
        setsid=True,
        # Python ignores these; a command gets them as any program does.
        setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ),
    )


def _which(name: str, path: str | None) -> str:
    """Where ``name`` is, looked up in ``path`` as execvp(3) does."""
    if "/" in name:
        return name
    for folder in (path if path is not None else "/usr/local/bin:/usr/bin:/bin").split(":"):
        candidate = os.path.join(folder or ".", name)
        if os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return candidate
    raise FileNotFoundError(2, "No such file or directory", name)


def _killpg(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except OSError:
        pass  # gone already


def _kill_the_rest() -> None:
    """Kill every process of the sandbox but its init and this one (see the module's
    docstring): they belong to no command still running. Only as pid 2, the process bwrap
    starts in a pid namespace of its own: anywhere else kill(-1) would reach every process
    of the user."""
    if os.getpid() != 2:
        return
    try:
        os.kill(-1, _signal.SIGKILL)
    except OSError:
        pass  # there were none


def _undumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 0), through ``_ctypes`` itself: the ``ctypes`` package costs
    3-6 ms to import, more than the rest of the spawner's start."""
    import _ctypes

    class Libc:  # what ctypes.CDLL(None) is to a function: a handle
        _handle = _ctypes.dlopen(None)  # type: ignore[arg-type]  # None: the program's own symbols

    class Function(_ctypes.CFuncPtr):
        _flags_ = _ctypes.FUNCFLAG_CDECL | _ctypes.FUNCFLAG_USE_ERRNO

    if Function(("prctl", Libc))(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:  # type: ignore[arg-type]
        raise OSError(_ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


def _caught(signum: int, frame: object) -> None:
    pass


if __name__ == "__main__":
    main(int(sys.argv[1]))
