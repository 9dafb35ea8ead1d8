"""Reaching the daemon from the CLI: connect, or start it and wait for its socket."""

from __future__ import annotations

import os
import sys
import time

import click

from roost.protocol import Client, ErrorCode, RpcError, default_socket_path

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


def connect(path: str, *, start: bool = True) -> Client:
    """A client connected to the daemon at ``path``, starting the daemon if needed."""
    try:
        return Client.connect(path, client="roost-cli")
    except (FileNotFoundError, ConnectionRefusedError):
        if not start:
            raise DaemonError(f"no roost daemon is running on {path}") from None
    start_daemon(path)
    return Client.connect(path, client="roost-cli")


def start_daemon(path: str) -> int:
    """Start ``roost daemon`` detached (its own session), wait until it listens; its pid."""
    # Imported here: only the command that starts the daemon pays for subprocess.
    import subprocess

    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    errors = path + ".stderr"
    with open(errors, "wb") as stderr:
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
        try:
            Client.connect(path, hello=False).close()
            return process.pid
        except (FileNotFoundError, ConnectionRefusedError):
            pass
        status = process.poll()
        if status is not None:
            # Another command may have started a daemon at the same moment: ours lost the lock.
            try:
                Client.connect(path, hello=False).close()
                return process.pid
            except (FileNotFoundError, ConnectionRefusedError):
                with open(errors, errors="replace") as f:
                    detail = f.read().strip()
                raise DaemonError(f"the roost daemon exited with status {status}: {detail}") from None
        time.sleep(0.01)
    raise DaemonError(f"the roost daemon did not listen on {path} within {START_TIMEOUT:g} s")


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


def refused(error: RpcError) -> DaemonError:
    """An error response as a CLI error."""
    try:
        name = ErrorCode(error.code).name
    except ValueError:
        name = str(error.code)
    return DaemonError(f"{error.message} [{name}]")
