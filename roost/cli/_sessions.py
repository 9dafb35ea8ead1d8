"""Commands about sessions as a whole and their storage: sessions (and --prune), logs,
fork, gc."""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Any, Callable

import click

from roost.protocol import Client, ConnectionClosed, Timeout

from ._connect import DaemonError, Target, connect, daemon, last_session, resolve_session, target, workdir
from ._follow import follow, print_json
from ._render import Renderer, session_tree, size, tree_id, when
from ._safe_text import printable

#: Seconds ``logs --follow`` waits for a daemon that went away (or the connection to its
#: host) to come back.
RECONNECT_WAIT = 10.0


class Duration(click.ParamType):
    """A length of time: a number and a unit, ``90s``, ``45m``, ``12h``, ``30d``, ``2w``."""

    name = "duration"
    _UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", str(value))
        if match is None:
            self.fail(f"{value!r} is not a duration: a number and a unit, e.g. 30d, 12h, 45m, 90s, 2w", param, ctx)
        return float(match.group(1)) * self._UNITS[match.group(2)]


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list (or what --prune did) as JSON.")
@click.option("--prune", is_flag=True, help="Delete old sessions (with --older-than); asks first.")
@click.option("--older-than", type=Duration(), help="With --prune: no activity for this long (30d, 12h, 2w, ...).")
@click.option("--dry-run", is_flag=True, help="With --prune: only list what would be deleted.")
@click.option("--yes", "-y", is_flag=True, help="With --prune: delete without asking (for scripts).")
@click.pass_obj
def sessions(obj: dict[str, Any], as_json: bool, prune: bool, older_than: float | None, dry_run: bool, yes: bool) -> None:
    """List sessions: id, last activity, last run status, event count, title (the first
    task's first line), folder.

    Forks are listed under the session they were forked from, with the seq they start
    after (`└ ID @SEQ`).

    With --prune --older-than AGE, delete the sessions whose last activity is older than
    AGE, with their events; a session with a run in flight is never deleted, nor one with
    forks that are kept. It lists them and asks first (--yes: don't ask; --dry-run: only
    list). `roost gc` then frees the stored outputs that only they referred to.

    \b
    Examples:
      roost sessions --prune --older-than 30d --dry-run
      roost sessions --prune --older-than 2w --yes
    """
    if not prune and (older_than is not None or dry_run or yes):
        raise click.UsageError("--older-than, --dry-run and --yes go with --prune")
    if prune:
        if older_than is None:
            raise click.UsageError("--prune needs --older-than AGE (e.g. 30d)")
        _prune(obj, older_than, dry_run=dry_run, yes=yes, as_json=as_json)
        return
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
    titled = max(5, *(len(row.get("title") or "") for _, row in tree))
    click.echo(f"{'ID':<{width}} {'LAST ACTIVE':<19}  {'STATUS':<10} {'EVENTS':>6}  {'TITLE':<{titled}}  CWD")
    for name, row in tree:
        active = row.get("last_active") or row["created"]
        click.echo(
            f"{name:<{width}} {when(active):<19}  {row['status']:<10} {row['events']:>6}  "
            f"{printable(row.get('title') or ''):<{titled}}  {row['cwd']}"
        )


def _prune(obj: dict[str, Any], older_than: float, *, dry_run: bool, yes: bool, as_json: bool) -> None:
    with daemon(obj) as client:
        found = client.call("sessions.prune", older_than=older_than, dry_run=True)
        if dry_run or not found["sessions"]:
            if as_json:
                click.echo(json.dumps(found))
            else:
                _show_pruned(found, "would delete" if found["sessions"] else "")
            return
        if not as_json:
            _show_pruned(found, "to delete")
        if not yes:
            if not sys.stdin.isatty():
                raise click.ClickException("not a terminal to ask at: add --yes to delete what is shown")
            if not click.confirm(f"Delete these {len(found['sessions'])} sessions?", default=False):
                click.echo("nothing was deleted")
                return
        ids = [row["id"] for row in found["sessions"]]
        done = client.call("sessions.prune", older_than=older_than, sessions=ids)
    if as_json:
        click.echo(json.dumps(done))
        return
    click.echo(f"deleted {len(done['sessions'])} sessions; roost gc frees the outputs only they held")
    left = set(ids) - {row["id"] for row in done["sessions"]}
    if left:
        click.echo(f"kept, active meanwhile: {', '.join(sorted(left))}")


def _show_pruned(found: dict[str, Any], verb: str) -> None:
    rows = found["sessions"]
    if not rows:
        click.echo("no session is that old")
    else:
        click.echo(f"{verb} {len(rows)} sessions:")
        click.echo(f"  {'ID':<13} {'LAST ACTIVE':<19}  {'STATUS':<10} {'EVENTS':>6}  CWD")
        for row in rows:
            click.echo(
                f"  {row['id']:<13} {when(row['last_active']):<19}  {row['status']:<10} {row['events']:>6}  {row['cwd']}"
            )
    for row in found["kept"]:
        click.echo(f"kept, {row.get('why', 'a run is in flight')}: {row['id']} ({row['cwd']})")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print what was freed as JSON.")
@click.pass_obj
def gc(obj: dict[str, Any], as_json: bool) -> None:
    """Free the stored tool outputs (and other long texts) that no session refers to any
    more: those of deleted sessions (roost sessions --prune). Says how much it freed.

    The database file keeps its size: the room freed inside it is reused by what is
    stored next.
    """
    with daemon(obj) as client:
        done = client.call("gc")
    if as_json:
        click.echo(json.dumps(done))
        return
    click.echo(
        f"freed {size(done['bytes'])} ({done['blobs']} stored outputs nothing referred to); "
        f"{done['database']}: {size(done['database_bytes'])}, {size(done['free_bytes'])} of it free for reuse"
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
@click.argument("session", required=False)
@click.option("--follow", "-f", "follow_", is_flag=True, help="After the history, show new events as they happen.")
@click.option("--since", type=click.IntRange(min=0), default=0, help="Only events after this seq.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON event per line.")
@click.pass_obj
def logs(obj: dict[str, Any], session: str | None, follow_: bool, since: int, as_json: bool) -> None:
    """Show SESSION's stored events (default: the session of this folder used last); with
    --follow, then its live ones (Ctrl-C to stop).

    Each event's first line starts with its seq, [17]: the point `roost fork --at` takes.

    \b
    Example, from a second terminal while a run is going:
      roost logs 3f2a --follow
    """
    on_event = print_json if as_json else Renderer(seqs=True).render
    with daemon(obj) as client:
        if session is None:
            session = last_session(client, workdir(target(obj), client))
        else:
            session = resolve_session(client, session)
        if follow_:
            try:
                _follow_across_restarts(target(obj), client, session, on_event, since)
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
    where: Target, client: Client, session: str, on_event: Callable[[dict[str, Any]], None], since: int
) -> None:
    """Follow until Ctrl-C; when the daemon restarts (or the connection to its host
    drops), connect again and re-attach from the last seq seen."""
    last = since

    def seen(event: dict[str, Any]) -> None:
        nonlocal last
        last = event.get("seq") or last
        on_event(event)

    while True:
        try:
            follow(client, session, seen, since=last)
            lost = "the daemon closed the connection"
        except ConnectionClosed as exc:
            lost = str(exc)
        except Timeout as exc:
            # Here a silent daemon is frozen: an error. Over ssh it may be the network that
            # went silent: connect again.
            if where.host is None:
                raise
            lost = str(exc)
        click.echo(f"({lost}; at seq {last}, waiting {RECONNECT_WAIT:g} s for it to come back)", err=True)
        client.close()
        deadline = time.monotonic() + RECONNECT_WAIT
        while True:
            try:
                client = connect(where, start=False)
                break
            except (DaemonError, Timeout) as exc:
                if time.monotonic() > deadline:
                    why = exc.message if isinstance(exc, DaemonError) else str(exc)
                    raise DaemonError(f"the daemon did not come back: {why}") from None
                time.sleep(0.2)
        click.echo(f"(back: following from seq {last})", err=True)
