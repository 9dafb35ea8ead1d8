"""Commands about sessions as a whole: sessions, logs, fork."""

from __future__ import annotations

import json
import time
from typing import Any, Callable

import click

from roost.protocol import Client, ConnectionClosed

from ._connect import DaemonError, connect, daemon, resolve_session, socket_path
from ._follow import follow, print_json
from ._render import Renderer, session_tree, tree_id, when

#: Seconds ``logs --follow`` waits for a daemon that went away to come back.
RECONNECT_WAIT = 10.0


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.pass_obj
def sessions(obj: dict[str, Any], as_json: bool) -> None:
    """List sessions: id, created, cwd, last run status, event count.

    Forks are listed under the session they were forked from, with the seq they start
    after (`└ ID @SEQ`).
    """
    with daemon(obj) as client:
        rows = client.call("sessions.list")["sessions"]
    if as_json:
        click.echo(json.dumps(rows))
        return
    if not rows:
        click.echo("no sessions yet: roost dispatch TASK starts one")
        return
    tree = [(tree_id(depth, row), row) for depth, row in session_tree(rows)]
    width = max(13, *(len(name) + 1 for name, _ in tree))
    click.echo(f"{'ID':<{width}} {'CREATED':<19}  {'STATUS':<10} {'EVENTS':>6}  CWD")
    for name, row in tree:
        click.echo(
            f"{name:<{width}} {when(row['created']):<19}  {row['status']:<10} {row['events']:>6}  {row['cwd']}"
        )


@click.command()
@click.argument("session")
@click.option("--at", type=click.IntRange(min=1), help="The last seq of SESSION's history to keep (default: all).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def fork(obj: dict[str, Any], session: str, at: int | None, as_json: bool) -> None:
    """Make a new session whose history is SESSION's up to seq --at; print its id.

    The history is shared with SESSION, not copied. A seq between a tool call and its
    result is moved back to the last point a model accepts (the end of a step, or the
    model call before it); a run cut there ends `aborted` in the fork. SESSION, and any
    run in flight in it, is not changed.

    \b
    Example: try the last task again differently
      roost logs 3f2a            # find the seq to go back to
      roost fork 3f2a --at 17
      roost dispatch "do it another way" --session NEW_ID
    """
    with daemon(obj) as client:
        session = resolve_session(client, session)
        params: dict[str, Any] = {"session": session}
        if at is not None:
            params["at"] = at
        result = client.call("sessions.fork", params)
    if as_json:
        click.echo(json.dumps(result))
        return
    click.echo(result["session"])
    if result["forked_at"] != result["at"]:
        click.echo(
            f"(seq {result['at']} is between a tool call and its result: the fork starts after seq "
            f"{result['forked_at']})",
            err=True,
        )
    if result.get("ended_run"):
        click.echo(f"(the run {result['ended_run']} was in progress there: it ends aborted in the fork)", err=True)


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
    path = socket_path(obj["socket"])
    with daemon(obj) as client:
        session = resolve_session(client, session)
        if follow_:
            try:
                _follow_across_restarts(path, client, session, on_event, since)
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


def _follow_across_restarts(
    path: str, client: Client, session: str, on_event: Callable[[dict[str, Any]], None], since: int
) -> None:
    """Follow until Ctrl-C; when the daemon restarts, re-attach from the last seq seen."""
    last = since

    def seen(event: dict[str, Any]) -> None:
        nonlocal last
        last = event.get("seq") or last
        on_event(event)

    while True:
        try:
            follow(client, session, seen, since=last)
        except ConnectionClosed:
            click.echo(f"(lost the daemon at seq {last}; waiting {RECONNECT_WAIT:g} s for it)", err=True)
        client.close()
        deadline = time.monotonic() + RECONNECT_WAIT
        while True:
            try:
                client = connect(path, start=False)
                break
            except DaemonError:
                if time.monotonic() > deadline:
                    raise DaemonError("the daemon went away and did not come back") from None
                time.sleep(0.2)
