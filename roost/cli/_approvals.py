"""People in the loop from the command line: approve, deny, answer, pending.

Any terminal may answer: the first answer wins, and every attached client sees who gave it.
"""

from __future__ import annotations

from typing import Any

import click

from roost.protocol import Client, RpcError

from . import _approval_keys as keys
from ._connect import daemon, resolve_session
from ._render import brief
from ._safe_text import visible


@click.command()
@click.argument("which", nargs=-1, metavar="[SESSION] [CALL_ID]")
@click.option("--session-scope", is_flag=True, help="Also allow such calls for the rest of the session.")
@click.option("--any-arguments", is_flag=True, help="With --session-scope: their commands with any arguments (the request's wider offer, see roost pending).")
@click.pass_obj
def approve(obj: dict[str, Any], which: tuple[str, ...], session_scope: bool, any_arguments: bool) -> None:
    """Approve a tool call a session waits on.

    Name the call by its id or the start of it, the session by its id or the start of it,
    or neither when only one request is open (see `roost pending`).

    \b
    Examples:
      roost approve                 # the one open request
      roost approve 3f2a            # the one request session 3f2a waits on
      roost approve 3f2a toolu_01 --session-scope
    """
    if any_arguments and not session_scope:
        raise click.UsageError("--any-arguments goes with --session-scope")
    scope = (keys.SESSION_ANY if any_arguments else keys.SESSION) if session_scope else keys.ONCE
    call_id = _respond(obj, "permission.respond", which, decision="approve", scope=scope)
    click.echo(f"approved {call_id}" + (" for the session" if session_scope else ""))


@click.command()
@click.argument("which", nargs=-1, metavar="[SESSION] [CALL_ID]")
@click.option("--reason", "-r", default="", help="Why; the model sees it.")
@click.pass_obj
def deny(obj: dict[str, Any], which: tuple[str, ...], reason: str) -> None:
    """Deny a tool call a session waits on (named as for `roost approve`); the model gets
    an error result."""
    params: dict[str, Any] = {"decision": "deny"}
    if reason:
        params["reason"] = reason
    call_id = _respond(obj, "permission.respond", which, **params)
    click.echo(f"denied {call_id}")


@click.command()
@click.argument("which", nargs=-1, metavar="[SESSION] [CALL_ID] TEXT", required=True)
@click.pass_obj
def answer(obj: dict[str, Any], which: tuple[str, ...]) -> None:
    """Answer a question (an ask_human call) with TEXT; the question is named as for
    `roost approve`."""
    call_id = _respond(obj, "human.respond", which[:-1], answer=which[-1])
    click.echo(f"answered {call_id}")


@click.command()
@click.option("--session", "-s", help="Only this session (id or unique prefix).")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.pass_obj
def pending(obj: dict[str, Any], session: str | None, as_json: bool) -> None:
    """List the permission requests and questions waiting for an answer."""
    with daemon(obj) as client:
        params = {"session": resolve_session(client, session)} if session else {}
        rows = client.call("pending", params)["pending"]
    if as_json:
        import json  # only here: the commands start without it

        click.echo(json.dumps(rows))
        return
    if not rows:
        click.echo("nothing is waiting for an answer")
        return
    for row in rows:
        click.echo(describe_request(row))
        if row.get("kind") != "human":
            click.echo(click.style(f"  {keys.offer(row)}", dim=True))
        click.echo(click.style(f"  {answer_hint(row)}", dim=True))


# What a request shows comes from the model (a command, a question, its choices, the call's
# id), so it passes through ``visible``: an escape sequence in it must not reach the
# terminal (OSC 52 writes the clipboard), nor may a carriage return or a bidirectional
# override make the command a person approves look like another.


def describe_request(row: dict[str, Any]) -> str:
    """One open request in one line: session, call, and what is asked."""
    if row.get("kind") == "human":
        choices = row.get("choices") or []
        offer = f" [{' / '.join(map(str, choices))}]" if choices else ""
        return visible(f"{row['session']} {row['call_id']} question: {row.get('question', '')}{offer}")
    tool = row.get("name") or row.get("tool", "")
    return visible(f"{row['session']} {row['call_id']} {tool} {brief(row.get('input'))}")


def answer_hint(row: dict[str, Any]) -> str:
    """The commands that answer ``row``."""
    session, call = row["session"], row["call_id"]
    if row.get("kind") == "human":
        return visible(f'roost answer {session} {call} "..."')
    return visible(f"roost approve {session} {call}{keys.approve_flags(row)} · roost deny {session} {call} [--reason ...]")


def _respond(obj: dict[str, Any], method: str, which: tuple[str, ...], **params: Any) -> str:
    """Send ``method`` for the open request ``which`` names; the call id answered."""
    if len(which) > 2:
        raise click.UsageError(f"name at most a session and a call, not {len(which)} things")
    with daemon(obj) as client:
        try:
            row = _the_request(client.call("pending")["pending"], which, method == "human.respond")
        except click.UsageError:
            if len(which) < 2:
                raise
            # Named in full but not open: the daemon says why (answered already, and by whom).
            row = {"session": resolve_session(client, which[0]), "call_id": which[1]}
        client.call(method, session=row["session"], call_id=row["call_id"], **params)
    return str(row["call_id"])


def _the_request(rows: list[dict[str, Any]], which: tuple[str, ...], human: bool) -> dict[str, Any]:
    """The one open request (a question if ``human``, else a permission request) that
    ``which`` names: a session and a call, a session or a call, or nothing; each by id or
    the start of it.

    Raises:
        click.UsageError: none or more than one request fits; the message lists them.
    """
    what = "question" if human else "permission request"
    rows = [r for r in rows if (r.get("kind") == "human") == human]
    if len(which) == 2:
        fits = [r for r in rows if r["session"].startswith(which[0]) and r["call_id"].startswith(which[1])]
    elif which:
        fits = [r for r in rows if r["call_id"].startswith(which[0])] or [r for r in rows if r["session"].startswith(which[0])]
    else:
        fits = rows
    if len(fits) == 1:
        return fits[0]
    named = " ".join(which)
    if not fits:
        where = f" for {named}" if named else ""
        listed = "".join(f"\n  {describe_request(r)}" for r in rows)
        raise click.UsageError(f"no open {what}{where}" + (f"; open now:{listed}" if listed else ""))
    listed = "".join(f"\n  {describe_request(r)}" for r in fits)
    raise click.UsageError(f"{len(fits)} {what}s are open{' for ' + named if named else ''}: name one{listed}")


def prompt_answer(client: Client, event: dict[str, Any]) -> None:
    """Ask the person at this terminal about an open request and send the answer: an
    approval with one key (``_approval_keys``), a question with a line.

    Another terminal may answer first; then the daemon refuses this answer and says who.
    """
    session, call_id = event["session"], event["call_id"]
    try:
        if event["type"] == "human.asked":
            choices = event.get("choices") or []
            for i, choice in enumerate(choices, 1):
                click.echo(f"  {i}. {visible(str(choice))}")
            text = click.prompt("  answer", default="", show_default=False)
            if text.isdigit() and 1 <= int(text) <= len(choices):
                text = choices[int(text) - 1]
            client.call("human.respond", session=session, call_id=call_id, answer=text)
            return
        decision, scope = _approval(event)
        params: dict[str, Any] = {"decision": decision, "scope": scope}
        if decision == keys.DENY:
            reason = click.prompt("  reason (the model sees it)", default="", show_default=False)
            params = {"decision": decision, **({"reason": reason} if reason else {})}
        client.call("permission.respond", session=session, call_id=call_id, **params)
    except RpcError as exc:
        click.echo(click.style(visible(f"  {exc.message}"), fg="yellow"), err=True)


def _approval(event: dict[str, Any]) -> tuple[str, str]:
    """The decision and scope the person at this terminal gives, by keys alone (no Enter)."""
    line = " · ".join(f"{k} {meaning}" for k, meaning in keys.key_parts(event))
    choosing = False
    while True:
        click.echo("  1 / 2 (Esc: back) › " if choosing else f"  {line} › ", nl=False)
        # Keys typed quickly arrive together: each is taken in turn.
        typed = _keys()
        click.echo("".join(c for c in typed if c.isprintable()))
        for key in typed:
            if choosing:
                picked = keys.chosen(event, key)
                if picked is not None:
                    return keys.APPROVE, picked.scope
                if key == "\x1b":
                    choosing = False
                    break
                continue
            given = keys.answer(event, key)
            if given is None:
                continue
            if given.decision != keys.CHOOSE:
                return given.decision, given.scope
            choosing = True
            for number, what, also in keys.scope_lines(event):
                click.echo(f"    {number}  {what}" + click.style(f"  ({also})" if also else "", dim=True))


def _keys() -> str:
    """The keys pressed at this terminal, read in raw mode. The mode changes at once, not
    after a flush as in ``click.getchar``, which drops keys typed just before the read.
    Ctrl-C raises KeyboardInterrupt (it aborts the run, as anywhere in dispatch)."""
    import os
    import sys
    import termios
    import tty

    fd = sys.stdin.fileno()
    before = termios.tcgetattr(fd)
    try:
        tty.setraw(fd, termios.TCSANOW)
        typed = os.read(fd, 32).decode(errors="replace")
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, before)
    if "\x03" in typed:
        raise KeyboardInterrupt
    return typed
