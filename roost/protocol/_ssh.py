"""Reaching a daemon on another machine: OpenSSH carries the msgpack-RPC byte stream.

Design: roost has no network protocol of its own. ``ssh://[user@]host[:port]`` means:
run ``ssh host roost bridge`` and talk over its stdin and stdout; the remote ``roost
bridge`` relays them to that user's daemon socket (starting the daemon if need be, with
every local check made there). Authentication, encryption and host keys are SSH's, and
nothing listens on a TCP port.

- ``ROOST_SSH_COMMAND`` replaces ``ssh`` and its options (split as a shell would, like
  ``GIT_SSH_COMMAND``); otherwise the user's own ssh config applies.
- The remote roost is a command line for the remote shell: the caller's ``command``
  (the CLI's ``[hosts.NAME] roost``), else ``ROOST_REMOTE_COMMAND``, else ``roost`` (a
  non-interactive ssh session may not have it on ``PATH``).
- ``roost bridge --no-start`` exits :data:`BRIDGE_NO_DAEMON` when no daemon runs there, so a
  client tells "nothing runs there" from "ssh failed" (255) by the exit status alone.
- Connections are shared (``ControlMaster=auto``, ``ControlPersist=60s``), their control
  sockets in a private folder next to the local socket's: after the first, a command pays
  one local hop and a round trip to open a session, not a TCP and key exchange.
- Options given on the command line come first, and ssh keeps the first value it sees:
  what ``ROOST_SSH_COMMAND`` says beats ours, and ours beat the ssh config files.

Stdlib only.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from dataclasses import dataclass
from typing import Sequence

from ._address import default_socket_path
from ._errors import ConnectionClosed, SshFailed
from ._private import check_private_dir

#: Seconds an unused shared connection stays open.
CONTROL_PERSIST = 60
#: Exit status of ``roost bridge --no-start`` when no daemon runs (ssh's own is 255).
BRIDGE_NO_DAEMON = 3
#: Exit status of a remote shell that did not find the command (``roost`` not on PATH).
_NOT_FOUND = 127
#: Exit status of ssh when ssh itself fails.
_SSH_FAILED = 255

# A host name or address as ssh takes it: no spaces, quotes or shell characters.
_HOST = re.compile(r"[A-Za-z0-9._:%-]+")
_USER = re.compile(r"[A-Za-z0-9._-][A-Za-z0-9._$-]*")


@dataclass(frozen=True, slots=True)
class SshHost:
    """Where a remote daemon is: ``ssh://[user@]host[:port]``."""

    host: str
    user: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, url: str) -> SshHost:
        """Read an ``ssh://`` URL (an IPv6 address in brackets).

        Raises:
            ValueError: not ``ssh://[user@]host[:port]``; the message says what is wrong.
        """
        if not url.startswith("ssh://"):
            raise ValueError(f"{url!r} is not an ssh:// URL (ssh://[user@]host[:port])")
        rest = url[len("ssh://"):]
        if rest.endswith("/"):
            rest = rest[:-1]
        if any(c in rest for c in "/?#"):
            raise ValueError(f"{url!r}: an ssh:// URL here names a machine only (ssh://[user@]host[:port])")
        user, at, where = rest.rpartition("@")
        if at and not _USER.fullmatch(user):
            raise ValueError(f"{url!r}: {user!r} is not a user name")
        port = ""
        if where.startswith("["):
            host, bracket, after = where[1:].partition("]")
            if not bracket or (after and not after.startswith(":")):
                raise ValueError(f"{url!r}: an IPv6 address goes in brackets: ssh://[::1]:22")
            port = after[1:]
        elif where.count(":") > 1:
            raise ValueError(f"{url!r}: an IPv6 address goes in brackets: ssh://[::1]:22")
        else:
            host, _, port = where.partition(":")
        # A host that starts with "-" would be an option to ssh.
        if not host or host.startswith("-") or not _HOST.fullmatch(host):
            raise ValueError(f"{url!r}: {host!r} is not a host name")
        number = None
        if port:
            if not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{url!r}: {port!r} is not a port")
            number = int(port)
        return cls(host, user or None, number)

    @property
    def url(self) -> str:
        """The host as an ``ssh://`` URL."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        return f"ssh://{user}{host}{port}"

    @property
    def destination(self) -> str:
        """``[user@]host``, as ssh takes it."""
        return f"{self.user}@{self.host}" if self.user else self.host


def control_dir(socket_path: str | None = None) -> str:
    """The private folder of the shared connections' control sockets: ``ssh`` next to the
    local daemon's socket (``socket_path``, default :func:`default_socket_path`); made 0700
    if missing.

    Raises:
        NotPrivate: it, or the socket's folder, is not a folder only we can change.
    """
    parent = os.path.dirname(socket_path or default_socket_path()) or "."
    check_private_dir(parent)
    folder = os.path.join(parent, "ssh")
    check_private_dir(folder)
    return folder


def ssh_argv(
    host: SshHost,
    remote: Sequence[str] | None,
    *,
    command: str | None = None,
    batch: bool = True,
    connect_timeout: float | None = None,
    folder: str | None = None,
) -> list[str]:
    """The ssh command line that runs ``roost REMOTE...`` on ``host`` (see the module).

    ``remote`` None opens the shared connection alone (``-N -f``: in the background once
    authenticated), so that ssh can ask the person at this terminal for a passphrase,
    a password or a new host key (``batch`` false) before the commands that never ask.
    ``connect_timeout`` bounds reaching the host (a question to a person is not counted).
    ``folder`` holds the control sockets (default :func:`control_dir`). ``command`` is the
    remote roost (see the module).

    Raises:
        ValueError: ``ROOST_SSH_COMMAND`` cannot be split, or is empty.
        NotPrivate: the control sockets' folder is not private.
    """
    try:
        argv = shlex.split(os.environ.get("ROOST_SSH_COMMAND") or "ssh")
    except ValueError as exc:
        raise ValueError(f"ROOST_SSH_COMMAND cannot be split as a shell would: {exc}") from None
    if not argv:
        raise ValueError("ROOST_SSH_COMMAND is empty")
    # ssh expands %-tokens in ControlPath: a "%" of the folder's own is written "%%".
    control = os.path.join((folder or control_dir()).replace("%", "%%"), "%C")
    argv += ["-o", "ControlMaster=auto", "-o", f"ControlPath={control}",
             "-o", f"ControlPersist={CONTROL_PERSIST}s"]
    if batch:
        argv += ["-o", "BatchMode=yes"]
    if connect_timeout is not None:
        argv += ["-o", f"ConnectTimeout={max(1, math.ceil(connect_timeout))}"]
    if host.port is not None:
        argv += ["-p", str(host.port)]
    if remote is None:
        return [*argv, "-N", "-f", "--", host.destination]
    # No terminal on the remote side: the stream is bytes, and no escape character reads it.
    # The remote command is a line for the remote shell: ROOST_REMOTE_COMMAND as written.
    command = command or os.environ.get("ROOST_REMOTE_COMMAND") or "roost"
    return [*argv, "-T", "--", host.destination, " ".join([command, *(shlex.quote(a) for a in remote)])]


def bridge_argv(host: SshHost, *, start: bool, command: str | None = None,
                connect_timeout: float | None = None) -> list[str]:
    """The ssh command line of a connection to ``host``'s daemon: ``roost bridge`` there
    (``--no-start`` unless ``start``); see :func:`ssh_argv`."""
    return ssh_argv(host, ["bridge"] if start else ["bridge", "--no-start"], command=command,
                    connect_timeout=connect_timeout)


def unreachable(host: SshHost, status: int | None, last_words: str, *, start: bool) -> Exception:
    """What a connection that ended before the handshake means, from the ssh child's exit
    status and its last words: ``ConnectionRefusedError`` when no daemon runs there (and
    none was to be started), :class:`SshFailed` when ssh failed, else
    :class:`ConnectionClosed`."""
    if not start and status == BRIDGE_NO_DAEMON:
        return ConnectionRefusedError(f"no roost daemon is running on {host.url}")
    message = f"cannot reach the roost daemon on {host.url}: {last_words or 'the connection ended'}"
    if status == _NOT_FOUND:
        message += " (is roost on the remote PATH? set [hosts.NAME] roost or ROOST_REMOTE_COMMAND)"
    elif status is not None:
        message += f" (exit status {status})"
    return SshFailed(message) if status == _SSH_FAILED else ConnectionClosed(message)
