"""Reaching the daemon from the CLI: connect, or start it and wait for its socket.

Other users of the machine are kept out before anything happens: the socket's folder must
be a real folder of ours that no one else can write to (created 0700 when missing), the
daemon must run as us, and the one file the CLI writes (``<socket>.stderr``, when it starts
the daemon) is never written through a symbolic link. A daemon that stops answering is an
error after ``ROOST_TIMEOUT`` seconds of silence, never a hang.

A command's daemon is its :class:`Target`: this user's on this machine, or, with ``--host``
(``ROOST_HOST``), that user's on another machine, over ssh (``roost bridge`` there does
the checks above on that machine). A remote target never starts a local daemon, folders
(``--cwd``) are the remote machine's, and this terminal's environment stays here.
"""

from __future__ import annotations

import math
import os
import posixpath
import sys
import time
from contextlib import contextmanager
from typing import Any, Iterator, NamedTuple

import click

from roost.protocol import (
    DEFAULT_TIMEOUT,
    Client,
    ConnectionClosed,
    ErrorCode,
    NotPrivate,
    RpcError,
    SshFailed,
    check_private_dir,
    default_socket_path,
)

from ._hosts import Host, find_host

#: Seconds a command waits for a daemon it started to listen.
START_TIMEOUT = 15.0

#: Exit status of a command the daemon refused, or that could not reach it.
EXIT_REFUSED = 10


class DaemonError(click.ClickException):
    """The daemon refused the request or could not be reached."""

    exit_code = EXIT_REFUSED

    def format_message(self) -> str:
        return self.message


def socket_path(explicit: str | None) -> str:
    """``--socket``, else the protocol's default (ROOST_SOCKET, runtime dir, fallback)."""
    return explicit or default_socket_path()


def call_timeout() -> float | None:
    """Seconds of silence after which a command gives up on the daemon: ``ROOST_TIMEOUT``,
    else 30; ``0`` waits for ever (None)."""
    raw = os.environ.get("ROOST_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not (seconds >= 0 and math.isfinite(seconds)):
        raise click.UsageError(f"ROOST_TIMEOUT must be a number of seconds (0: no limit), not {raw!r}")
    return seconds or None


class Target(NamedTuple):
    """Where a command's daemon is: the local one at ``socket``, or, when ``host`` is set,
    the daemon of that machine (over ssh; ``socket`` is then unused)."""

    socket: str
    host: Host | None = None

    @property
    def label(self) -> str:
        """How messages name it: the socket's path, or the host's name or URL."""
        return self.host.label if self.host is not None else self.socket


def target(obj: dict[str, Any]) -> Target:
    """The command's :class:`Target`, from ``--socket`` and ``--host`` (read once: a named
    host is looked up in config.toml on first use, so ``roost bridge`` never does)."""
    found = obj.get("target")
    if found is None:
        host = obj.get("host")
        found = obj["target"] = Target(socket_path(obj["socket"]), find_host(host) if host else None)
    return found


def connect(where: Target, *, start: bool = True) -> Client:
    """A client connected to the daemon of ``where``, starting the daemon if needed (the
    remote one through ``roost bridge`` there; never a local one for a remote target).

    Raises:
        DaemonError: no daemon runs (and ``start`` is false) or it could not be started;
            the socket's folder is not safe (see :func:`check_socket_dir`); ssh failed.
        NotPrivate: a process of another user serves the socket.
    """
    if where.host is not None:
        try:
            return _connect_remote(where, start=start)
        except ConnectionRefusedError as exc:
            raise DaemonError(str(exc)) from None
    client = try_connect(where)
    if client is not None:
        return client
    if not start:
        raise DaemonError(f"no roost daemon is running on {where.socket}")
    start_daemon(where.socket)
    client = Client.connect(where.socket, client="roost-cli", timeout=call_timeout(), catalogue=False)
    report_notices(client)
    return client


def report_notices(client: Client) -> None:
    """Print on stderr what a daemon just started says its user should hear of (its
    database was damaged and set aside, and how to recover it): said once, by the
    command that started it; ``roost status`` shows it again."""
    for notice in client.info.get("notices") or []:
        click.echo(f"roost: {notice}", err=True)


@contextmanager
def daemon(obj: dict[str, Any], *, start: bool = True) -> Iterator[Client]:
    """The daemon, for one command: a client connected to it (started first if need be,
    unless ``start`` is false); an error response inside the block becomes the command's
    error message and exit status (:func:`refused`)."""
    with connect(target(obj), start=start) as client:
        try:
            yield client
        except RpcError as exc:
            raise refused(exc) from None


def try_connect(where: Target) -> Client | None:
    """A client connected to the daemon of ``where``, or None when none runs there.

    Creates nothing; the socket's folder is checked first.
    """
    if where.host is not None:
        try:
            return _connect_remote(where, start=False)
        except ConnectionRefusedError:
            return None
    if not check_socket_dir(where.socket, create=False):
        return None
    try:
        return Client.connect(where.socket, client="roost-cli", timeout=call_timeout(), catalogue=False)
    except (FileNotFoundError, ConnectionRefusedError):
        return None
    except PermissionError:
        raise DaemonError(not_yours(where.socket)) from None


def not_yours(path: str) -> str:
    """Why the socket ``path`` cannot be opened (it is another user's), in one line."""
    try:
        uid = os.stat(path).st_uid
    except OSError:
        return f"cannot open the socket {path}: permission denied"
    import pwd  # only on this error

    try:
        owner = f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        owner = f"uid {uid}"
    return (
        f"cannot open the socket {path}: it belongs to {owner}, not to you (uid {os.getuid()}); "
        "use a socket of your own (set XDG_RUNTIME_DIR or ROOST_SOCKET)"
    )


def _connect_remote(where: Target, *, start: bool) -> Client:
    """Connect over ssh. If ssh fails at a terminal, ssh is run once more, in the
    foreground and allowed to ask (a passphrase, a password, a new host key), to open the
    shared connection that the next try then uses.

    Raises:
        ConnectionRefusedError: no daemon runs there (``start`` false).
        DaemonError: anything else that keeps us from it.
    """
    host = where.host
    assert host is not None
    attempts = 2 if sys.stdin.isatty() and sys.stderr.isatty() else 1
    for attempt in range(attempts):
        try:
            return Client.connect_ssh(
                host.ssh.url, start=start, command=host.roost, client="roost-cli", timeout=call_timeout(), catalogue=False
            )
        except SshFailed as exc:
            if attempt + 1 == attempts or not _open_master(where):
                raise DaemonError(str(exc)) from None
        except ConnectionClosed as exc:
            raise DaemonError(str(exc)) from None
        except NotPrivate as exc:
            raise DaemonError(f"unsafe folder for ssh's control sockets: {exc}") from None
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
    raise AssertionError("unreachable")


def _open_master(where: Target) -> bool:
    """Open the shared ssh connection in the foreground (ssh may ask at this terminal);
    whether it is open."""
    import subprocess

    from roost.protocol import ssh_argv

    assert where.host is not None
    argv = ssh_argv(where.host.ssh, None, batch=False)
    try:
        return subprocess.run(argv, stdin=None, stdout=subprocess.DEVNULL).returncode == 0
    except OSError:
        return False


def workdir(where: Target, client: Client, given: str | None = None) -> str:
    """The folder a command means (``--cwd``, default: here), as the daemon's machine names
    it: on this machine, ``given`` or the current folder made absolute; on a remote host,
    ``given`` there, where ``~`` and a relative path start at that user's home, the
    default (the daemon says where it is in ``hello``).

    Raises:
        click.BadParameter: ``given`` is not a folder on this machine (local daemon only:
            a remote folder is the remote daemon's to check).
    """
    if where.host is None:
        if given and not os.path.isdir(given):
            raise click.BadParameter(f"{given!r} is not a folder")
        return os.path.abspath(given or os.getcwd())
    return remote_folder(client.info.get("home"), given)


def remote_folder(home: str | None, given: str | None) -> str:
    """``given`` (None: the home) as an absolute path on the remote machine whose home is
    ``home`` (None, from a daemon that does not say: left to the daemon to expand ``~``)."""
    given = given or "~"
    if given.startswith("/"):
        return posixpath.normpath(given)
    if given.startswith("~") and given != "~" and not given.startswith("~/"):
        return given  # another user's home (~name): the daemon expands it
    rest = given[2:] if given.startswith("~/") else "" if given == "~" else given
    if home is None:
        return posixpath.join("~", rest) if rest else "~"
    return posixpath.normpath(posixpath.join(home, rest))


def env_param(where: Target) -> dict[str, Any]:
    """The ``env`` param of the calls that take one: this terminal's environment for the
    local daemon; none for a remote one, which uses its own (local paths and secrets
    mean nothing there, and stay here)."""
    return {} if where.host is not None else {"env": dict(os.environ)}


def check_socket_dir(path: str, *, create: bool) -> bool:
    """Check the folder of the socket ``path`` (see :func:`roost.protocol.check_private_dir`);
    False when it does not exist (and ``create`` is false).

    Raises:
        DaemonError: the folder is a symbolic link, not a folder, another user's, or
            writable by others; the message says what to do.
    """
    try:
        return check_private_dir(os.path.dirname(path) or ".", create=create)
    except NotPrivate as exc:
        raise DaemonError(
            f"unsafe socket folder: {exc}; or use a socket elsewhere (set XDG_RUNTIME_DIR or ROOST_SOCKET)"
        ) from None


def start_daemon(path: str) -> int:
    """Start ``roost daemon`` detached (its own session), wait until it listens; its pid."""
    # Imported here: only the command that starts the daemon pays for subprocess.
    import subprocess

    check_socket_dir(path, create=True)
    errors = path + ".stderr"
    with os.fdopen(_private_file(errors), "wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "roost.daemon", "--socket", path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
            close_fds=True,
        )
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if _listening(path):
            return process.pid
        status = process.poll()
        if status is not None:
            # Another command may have started a daemon at the same moment: ours lost the lock.
            if _listening(path):
                return process.pid
            with open(errors, errors="replace") as f:
                detail = f.read().strip()
            raise DaemonError(f"the roost daemon exited with status {status}: {detail}")
        time.sleep(0.01)
    raise DaemonError(f"the roost daemon did not listen on {path} within {START_TIMEOUT:g} s")


def _listening(path: str) -> bool:
    try:
        Client.connect(path, hello=False, timeout=call_timeout()).close()
    except (FileNotFoundError, ConnectionRefusedError):
        return False
    except PermissionError:
        raise DaemonError(not_yours(path)) from None
    return True


def _private_file(path: str) -> int:
    """A descriptor on ``path``, emptied or created 0600; a symbolic link there is refused
    (another user may have planted it to make us overwrite a file of ours)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        if os.path.islink(path):
            raise DaemonError(f"{path} is a symbolic link; roost does not write through one: remove it") from None
        raise DaemonError(f"cannot write {path}: {exc.strerror}") from None
    try:
        os.fchmod(fd, 0o600)
    except BaseException:
        os.close(fd)
        raise
    return fd


def daemon_log() -> str:
    """Where the daemon writes its log: platformdirs' user log dir, found with the standard
    library because the CLI does not import platformdirs."""
    if sys.platform == "darwin":
        return os.path.expanduser("~/Library/Logs/roost/roostd.log")
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(state, "roost", "log", "roostd.log")


def resolve_session(client: Client, given: str) -> str:
    """A session id from a full id or a unique prefix of one."""
    ids = [s["id"] for s in client.call("sessions.list")["sessions"]]
    if given in ids:
        return given
    matches = [i for i in ids if i.startswith(given)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise DaemonError(f"no session {given!r} (roost sessions lists them)")
    raise DaemonError(f"{given!r} matches {len(matches)} sessions: {', '.join(matches)}")


def last_session(client: Client, folder: str) -> str:
    """The session of ``folder`` used last (its last event the newest)."""
    rows = [r for r in client.call("sessions.list")["sessions"] if r.get("cwd") == folder]
    if not rows:
        raise click.UsageError(f"no session in {folder} yet: roost dispatch TASK starts one")
    return used_last(rows)["id"]


def used_last(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Of ``sessions.list`` rows (at least one), the session used last: its last event the
    newest (what ``-c``, ``attach`` and a bare ``logs`` mean)."""
    return max(rows, key=lambda r: (r.get("last_active", 0), r.get("created", 0)))


def local_socket(obj: dict[str, Any], command: str) -> str:
    """The socket of the local daemon, started if it was not running, for a command that
    serves it to another program (``roost acp``, ``roost mcp serve``): not over ``--host``.

    Raises:
        click.UsageError: ``--host`` names a remote daemon.
    """
    where = target(obj)
    if where.host is not None:
        raise click.UsageError(f"{command} serves the local daemon: run it on the machine with the daemon")
    with daemon(obj):
        pass  # started now if it was not running: the served program connects to it
    return where.socket


def refused(error: RpcError) -> DaemonError:
    """An error response as a CLI error."""
    try:
        name = ErrorCode(error.code).name
    except ValueError:
        name = str(error.code)
    return DaemonError(f"{error.message} [{name}]")
