"""People in the loop from the command line: approve, deny, answer, pending.

Any terminal may answer: the first answer wins, and every attached client sees who gave it.
"""

from __future__ import annotations

from typing import Any

import click

from roost.protocol import Client, RpcError

from ._connect import daemon, resolve_session
from ._render import brief, session_offer


@click.command()
@click.argument("session")
@click.argument("call_id")
@click.option("--session-scope", is_flag=True, help="Also allow such calls for the rest of the session.")
@click.pass_obj
def approve(obj: dict[str, Any], session: str, call_id: str, session_scope: bool) -> None:
    """Approve the tool call CALL_ID that SESSION waits on.

    \b
    Example:
      roost approve 3f2a toolu_01 --session-scope
    """
    scope = "session" if session_scope else "once"
    _respond(obj, "permission.respond", session, call_id, decision="approve", scope=scope)
    click.echo(f"approved {call_id}" + (" for the session" if session_scope else ""))


@click.command()
@click.argument("session")
@click.argument("call_id")
@click.option("--reason", "-r", default="", help="Why; the model sees it.")
@click.pass_obj
def deny(obj: dict[str, Any], session: str, call_id: str, reason: str) -> None:
    """Deny the tool call CALL_ID that SESSION waits on; the model gets an error result."""
    params: dict[str, Any] = {"decision": "deny"}
    if reason:
        params["reason"] = reason
    _respond(obj, "permission.respond", session, call_id, **params)
    click.echo(f"denied {call_id}")


@click.command()
@click.argument("session")
@click.argument("call_id")
@click.argument("text")
@click.pass_obj
def answer(obj: dict[str, Any], session: str, call_id: str, text: str) -> None:
    """Answer the question CALL_ID (an ask_human call) in SESSION with TEXT."""
    _respond(obj, "human.respond", session, call_id, answer=text)
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
            click.echo(click.style(f"  {session_offer(row)}", dim=True))
        click.echo(click.style(f"  {answer_hint(row)}", dim=True))


def describe_request(row: dict[str, Any]) -> str:
    """One open request in one line: session, call, and what is asked."""
    if row.get("kind") == "human":
        choices = row.get("choices") or []
        offer = f" [{' / '.join(choices)}]" if choices else ""
        return f"{row['session']} {row['call_id']} question: {row.get('question', '')}{offer}"
    tool = row.get("name") or row.get("tool", "")
    return f"{row['session']} {row['call_id']} {tool} {brief(row.get('input'))}"


def answer_hint(row: dict[str, Any]) -> str:
    """The commands that answer ``row``."""
    session, call = row["session"], row["call_id"]
    if row.get("kind") == "human":
        return f'roost answer {session} {call} "..."'
    scope = " [--session-scope]" if row.get("session_rules") else ""
    return f"roost approve {session} {call}{scope} · roost deny {session} {call} [--reason ...]"


def _respond(obj: dict[str, Any], method: str, session: str, call_id: str, **params: Any) -> None:
    with daemon(obj) as client:
        client.call(method, session=resolve_session(client, session), call_id=call_id, **params)


def prompt_answer(client: Client, event: dict[str, Any]) -> None:
    """Ask the person at this terminal about an open request and send the answer.

    Another terminal may answer first; then the daemon refuses this answer and says who.
    """
    session, call_id = event["session"], event["call_id"]
    try:
        if event["type"] == "human.asked":
            choices = event.get("choices") or []
            for i, choice in enumerate(choices, 1):
                click.echo(f"  {i}. {choice}")
            text = click.prompt("  answer", default="", show_default=False)
            if text.isdigit() and 1 <= int(text) <= len(choices):
                text = choices[int(text) - 1]
            client.call("human.respond", session=session, call_id=call_id, answer=text)
            return
        rules = event.get("session_rules") or []
        click.echo(f"  {session_offer(event)}")
        choice = click.prompt(
            "  approve? [y]es once, [s]ession, [n]o" if rules else "  approve? [y]es once, [n]o",
            type=click.Choice(["y", "s", "n"] if rules else ["y", "n"]),
            show_choices=False,
        )
        if choice == "n":
            reason = click.prompt("  reason (the model sees it)", default="", show_default=False)
            params: dict[str, Any] = {"decision": "deny", **({"reason": reason} if reason else {})}
        else:
            params = {"decision": "approve", "scope": "session" if choice == "s" else "once"}
        client.call("permission.respond", session=session, call_id=call_id, **params)
    except RpcError as exc:
        click.echo(click.style(f"  {exc.message}", fg="yellow"), err=True)
