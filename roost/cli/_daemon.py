"""Commands about the daemon itself: status, stop, daemon."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import click

from roost.protocol import Client, ConnectionClosed, RoostError

from ._connect import (
    EXIT_REFUSED,
    DaemonError,
    Target,
    connect,
    env_param,
    report_notices,
    socket_path,
    start_daemon,
    target,
    try_connect,
    workdir,
)
from ._hosts import load_hosts
from ._safe_text import printable


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the status as JSON.")
@click.option("--all-hosts", is_flag=True, help="The local daemon and every [hosts.NAME] in config.toml, one line each.")
@click.pass_obj
def status(obj: dict[str, Any], as_json: bool, all_hosts: bool) -> None:
    """Show the daemon's pid, version, socket, uptime, sessions and runs in flight, its
    database (and what is wrong with it, if anything), whether commands can run sandboxed
    (and if not, why), notices (a damaged database set aside), and the config files a
    dispatch here reads, with the keys in them roost ignores.

    Does not start a daemon: exits 10 when none is running (with --all-hosts: when one of
    them is not running or cannot be reached); exits 1 when the config here is broken.
    """
    if all_hosts:
        _all_hosts(obj, as_json)
        return
    where = target(obj)
    with connect(where, start=False) as client:
        info = client.call("status", cwd=workdir(where, client), **env_param(where))
    config = info.get("config") or {}
    if as_json:
        import json  # only here: the commands start without it

        click.echo(json.dumps(info))
        if config.get("error"):
            raise SystemExit(1)
        return
    store = info.get("store") or {}
    host = where.host
    click.echo(
        f"roost {info['version']} · pid {info['pid']} · up {_duration(info['uptime'])}"
        + (f" · on {host.label}" if host is not None else "")
        + f"\nsocket   {info['socket']}\n"
        f"database {info.get('database', '?')}"
    )
    if store.get("ok") is False:
        click.secho(f"         UNAVAILABLE: {store.get('error')}", fg="red")
    # Only while some run: an older daemon does not say.
    background = f" · background commands {info['background_commands']}" if info.get("background_commands") else ""
    click.echo(f"sessions {info['sessions']} · runs in flight {info['runs']}{background}")
    sandbox = info.get("sandbox")
    if sandbox is not None:
        if sandbox.get("available"):
            click.echo(f"sandbox  {sandbox.get('backend')} ({sandbox.get('program')})")
        else:
            click.echo(
                f"sandbox  UNAVAILABLE: {sandbox.get('reason')}; commands will not run "
                "(with --sandbox off they run unsandboxed)"
            )
    for notice in info.get("notices") or []:
        click.secho(f"notice   {notice}", fg="yellow")
    if not config:
        return
    # What the config says of itself quotes the project's files (a key, a table's name):
    # printable only.
    if config.get("error"):
        click.secho(printable(f"config   BROKEN: {config['error']}; every dispatch here fails until it is fixed"), fg="red")
        raise SystemExit(1)
    click.echo(printable(f"config   {', '.join(config.get('files') or []) or 'none (built-in defaults)'}"))
    for warning in config.get("warnings") or []:
        click.secho(printable(f"         {warning}"), fg="yellow")


def _all_hosts(obj: dict[str, Any], as_json: bool) -> None:
    """``status --all-hosts``: every daemon asked at once (one ssh connection each)."""
    from concurrent.futures import ThreadPoolExecutor

    # Every host, whatever --host (or ROOST_HOST) says.
    local = Target(socket_path(obj["socket"]))
    targets = [("local", local), *((name, Target(local.socket, host)) for name, host in load_hosts().items())]
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda pair: _ask_status(pair[1]), targets))
    rows: list[dict[str, Any]] = [
        {"host": name, "url": where.host.ssh.url if where.host else None, "status": info, "error": error}
        for (name, where), (info, error) in zip(targets, answers)
    ]
    if as_json:
        import json

        click.echo(json.dumps({"hosts": rows}))
    else:
        width = max(len(row["host"]) for row in rows)
        for row in rows:
            info = row["status"]
            if info is not None:
                line = (f"roost {info['version']} · pid {info['pid']} · up {_duration(info['uptime'])} · "
                        f"sessions {info['sessions']} · runs in flight {info['runs']}")
            else:
                line = click.style(row["error"], fg="yellow")
            click.echo(f"{row['host']:<{width}}  {line}" + (f"  ({row['url']})" if row["url"] else ""))
    if any(row["status"] is None for row in rows):
        raise SystemExit(EXIT_REFUSED)


def _ask_status(where: Target) -> tuple[dict[str, Any] | None, str | None]:
    """The status of ``where``'s daemon, or why there is none: (status, None) or (None, why)."""
    try:
        client = try_connect(where)
        if client is None:
            return None, "not running"
        with client:
            return client.call("status"), None
    except (DaemonError, click.UsageError) as exc:
        return None, exc.message
    except RoostError as exc:
        return None, str(exc)


@click.command()
@click.pass_obj
def stop(obj: dict[str, Any]) -> None:
    """Stop the daemon: runs in flight are aborted (and stored), tool processes killed."""
    where = target(obj)
    client = try_connect(where)
    if client is None:
        click.echo("no roost daemon is running" + (f" on {where.label}" if where.host else ""))
        return
    with client:
        pid = client.info.get("pid")
        try:
            client.call("shutdown")
        except ConnectionClosed:
            pass
        if where.host is not None:
            # The daemon ends its connections as it exits; ssh relays that end.
            gone = _closed_within(client, 15)
    if where.host is None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and os.path.exists(where.socket):
            time.sleep(0.02)
        gone = not os.path.exists(where.socket)
    if not gone:
        raise DaemonError(f"the daemon (pid {pid}) did not stop within 15 s")
    click.echo(f"stopped roost daemon (pid {pid})" + (f" on {where.label}" if where.host else ""))


def _closed_within(client: Client, seconds: float) -> bool:
    """Whether the daemon ends the connection within ``seconds`` (notifications dropped)."""
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            client.next_notification(timeout=max(0.01, deadline - time.monotonic()))
    except ConnectionClosed:
        return True
    return False


@click.command()
@click.option("--foreground", is_flag=True, help="Run here (for systemd and debugging) and log to stderr too.")
@click.pass_obj
def daemon(obj: dict[str, Any], foreground: bool) -> None:
    """Start the daemon (other commands start it when needed)."""
    where = target(obj)
    if where.host is not None:
        if foreground:
            raise click.UsageError("--foreground runs the daemon here: give it no --host")
        client = try_connect(where)
        if client is not None:
            with client:
                click.echo(f"a roost daemon is already running on {where.label} (pid {client.info.get('pid')})")
            return
        with connect(where) as client:
            click.echo(f"started roost daemon (pid {client.info.get('pid')}) on {where.label}")
            report_notices(client)
        return
    path = where.socket
    if foreground:
        argv = [sys.executable, "-m", "roost.daemon", "--foreground", "--socket", path]
        os.execv(sys.executable, argv)
    client = try_connect(where)
    if client is not None:
        with client:
            click.echo(f"a roost daemon is already running (pid {client.info.get('pid')})")
        return
    pid = start_daemon(path)
    click.echo(f"started roost daemon (pid {pid}) on {path}")
    client = try_connect(where)
    if client is not None:
        with client:
            report_notices(client)


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"
