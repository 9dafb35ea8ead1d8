"""Commands about the daemon itself: status, stop, daemon."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import click

from roost.protocol import ConnectionClosed

from ._connect import DaemonError, connect, report_notices, socket_path, start_daemon, try_connect


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.pass_obj
def status(obj: dict[str, Any], as_json: bool) -> None:
    """Show the daemon's pid, version, socket, uptime, sessions and runs in flight, its
    database (and what is wrong with it, if anything), whether commands can run sandboxed
    (and if not, why), and notices (a damaged database set aside).

    Does not start a daemon: exits 10 when none is running.
    """
    with connect(socket_path(obj["socket"]), start=False) as client:
        info = client.call("status")
    if as_json:
        import json  # only here: the commands start without it

        click.echo(json.dumps(info))
        return
    store = info.get("store") or {}
    click.echo(
        f"roost {info['version']} · pid {info['pid']} · up {_duration(info['uptime'])}\n"
        f"socket   {info['socket']}\n"
        f"database {info.get('database', '?')}"
    )
    if store.get("ok") is False:
        click.secho(f"         UNAVAILABLE: {store.get('error')}", fg="red")
    click.echo(f"sessions {info['sessions']} · runs in flight {info['runs']}")
    sandbox = info.get("sandbox")
    if sandbox is not None:
        if sandbox.get("available"):
            click.echo(f"sandbox  {sandbox.get('backend')} ({sandbox.get('program')})")
        else:
            click.echo(f"sandbox  UNAVAILABLE: {sandbox.get('reason')}; commands run unsandboxed (with approvals)")
    for notice in info.get("notices") or []:
        click.secho(f"notice   {notice}", fg="yellow")


@click.command()
@click.pass_obj
def stop(obj: dict[str, Any]) -> None:
    """Stop the daemon: runs in flight are aborted (and stored), tool processes killed."""
    path = socket_path(obj["socket"])
    client = try_connect(path)
    if client is None:
        click.echo("no roost daemon is running")
        return
    with client:
        pid = client.info.get("pid")
        try:
            client.call("shutdown")
        except ConnectionClosed:
            pass
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and os.path.exists(path):
        time.sleep(0.02)
    if os.path.exists(path):
        raise DaemonError(f"the daemon (pid {pid}) did not stop within 15 s")
    click.echo(f"stopped roost daemon (pid {pid})")


@click.command()
@click.option("--foreground", is_flag=True, help="Run here (for systemd and debugging) and log to stderr too.")
@click.pass_obj
def daemon(obj: dict[str, Any], foreground: bool) -> None:
    """Start the daemon (other commands start it when needed)."""
    path = socket_path(obj["socket"])
    if foreground:
        argv = [sys.executable, "-m", "roost.daemon", "--foreground", "--socket", path]
        os.execv(sys.executable, argv)
    client = try_connect(path)
    if client is not None:
        with client:
            click.echo(f"a roost daemon is already running (pid {client.info.get('pid')})")
        return
    pid = start_daemon(path)
    click.echo(f"started roost daemon (pid {pid}) on {path}")
    client = try_connect(path)
    if client is not None:
        with client:
            report_notices(client)


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
