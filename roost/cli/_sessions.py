"""Commands that look at sessions: sessions, logs."""

from __future__ import annotations

import json
from typing import Any

import click

from roost.protocol import RpcError

from ._connect import connect, refused, resolve_session, socket_path
from ._follow import follow, print_json
from ._render import Renderer, when


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.pass_obj
def sessions(obj: dict[str, Any], as_json: bool) -> None:
    """List sessions: id, created, cwd, last run status, event count."""
    with connect(socket_path(obj["socket"])) as client:
        rows = client.call("sessions.list")["sessions"]
    if as_json:
        click.echo(json.dumps(rows))
        return
    if not rows:
        click.echo("no sessions yet: roost dispatch TASK starts one")
        return
    click.echo(f"{'ID':<13} {'CREATED':<19}  {'STATUS':<10} {'EVENTS':>6}  CWD")
    for row in rows:
        click.echo(
            f"{row['id']:<13} {when(row['created']):<19}  {row['status']:<10} {row['events']:>6}  {row['cwd']}"
        )


@click.command()
@click.argument("session")
@click.option("--follow", "-f", "follow_", is_flag=True, help="After the history, show new events as they happen.")
@click.option("--since", type=click.IntRange(min=0), default=0, help="Only events after this seq.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON event per line.")
@click.pass_obj
def logs(obj: dict[str, Any], session: str, follow_: bool, since: int, as_json: bool) -> None:
    """Show SESSION's stored events; with --follow, then its live ones (Ctrl-C to stop).

    \b
    Example, from a second terminal while a run is going:
      roost logs 3f2a --follow
    """
    on_event = print_json if as_json else Renderer().render
    with connect(socket_path(obj["socket"])) as client:
        session = resolve_session(client, session)
        try:
            if follow_:
                try:
                    follow(client, session, on_event, since=since)
                except KeyboardInterrupt:
                    pass
                return
            while True:
                page = client.call("events", session=session, since=since, limit=1000)
                for event in page["events"]:
                    on_event(event)
                    since = event["seq"]
                if len(page["events"]) < 1000:
                    break
        except RpcError as exc:
            raise refused(exc) from None
