"""``roost bridge``: stdin and stdout relayed to the daemon's socket, for ssh to carry.

``roost --host ssh://HOST`` runs ``ssh HOST roost bridge`` and speaks msgpack-RPC over the
child's pipes; on HOST this command connects to that user's daemon (starting it unless
``--no-start``, with every check a local command makes: the socket's folder, the peer's
uid) and copies bytes both ways until either side ends. With ``--no-start`` and no daemon
it exits ``BRIDGE_NO_DAEMON`` (3), so the client can tell that from a failed ssh. It never reads the messages, and
never writes anything else to stdout: that is the stream. Plain sockets and two threads,
one a direction, so that neither direction ever waits on the other (as on a socket).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import click

from roost.protocol import BRIDGE_NO_DAEMON, connect_unix

from ._connect import DaemonError, call_timeout, check_socket_dir, not_yours, socket_path, start_daemon

_CHUNK = 256 * 1024


@click.command()
@click.option("--no-start", is_flag=True, help=f"Exit {BRIDGE_NO_DAEMON} instead of starting a daemon that is not running.")
@click.pass_context
def bridge(ctx: click.Context, no_start: bool) -> None:
    """Relay stdin and stdout to this user's daemon (what `roost --host ssh://...` runs here).

    Starts the daemon when none runs. Exits when either side closes the connection.

    \b
    Example, by hand (bytes are msgpack-RPC):
      ssh build-box roost bridge
    """
    group = ctx.find_root()
    # ROOST_HOST in this machine's environment (shared dotfiles) means other commands.
    if group.get_parameter_source("host") is click.core.ParameterSource.COMMANDLINE:
        raise click.UsageError("roost bridge relays to this machine's daemon: give it no --host")
    sock = _connect(socket_path(ctx.obj["socket"]), start=not no_start)
    # Blocking, whatever the descriptors were handed over as: each thread waits on one.
    os.set_blocking(sys.stdin.fileno(), True)
    os.set_blocking(sys.stdout.fileno(), True)
    done = threading.Event()

    def upstream() -> None:
        # stdin -> daemon. Its end means the client has gone: nothing more to relay.
        try:
            while data := os.read(sys.stdin.fileno(), _CHUNK):
                sock.sendall(data)
        except OSError:
            pass
        done.set()

    def downstream() -> None:
        # daemon -> stdout. Its end means the daemon has gone: the client sees it as an end.
        out = sys.stdout.fileno()
        try:
            while data := sock.recv(_CHUNK):
                view = memoryview(data)
                while view:
                    view = view[os.write(out, view):]
        except OSError:
            pass
        done.set()

    # Daemon threads: a thread blocked in a read must not keep the process alive.
    for relay in (upstream, downstream):
        threading.Thread(target=relay, daemon=True).start()
    done.wait()
    sock.close()


def _connect(path: str, *, start: bool) -> Any:
    """A connected socket to the daemon at ``path`` (without saying hello: the client
    behind the bridge does), starting the daemon when none listens and ``start``."""
    timeout = call_timeout()
    if check_socket_dir(path, create=False):
        try:
            stream = connect_unix(path, timeout)
        except (FileNotFoundError, ConnectionRefusedError):
            stream = None
        except PermissionError:
            raise DaemonError(not_yours(path)) from None
        if stream is not None:
            stream.settimeout(None)
            return stream.socket
    if not start:
        click.echo(f"roost: no roost daemon is running on {path}", err=True)
        sys.exit(BRIDGE_NO_DAEMON)
    start_daemon(path)
    stream = connect_unix(path, timeout)
    stream.settimeout(None)
    return stream.socket
