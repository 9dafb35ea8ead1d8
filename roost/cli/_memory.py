"""``roost memory``: what the daemon remembers (search it, list it, forget an entry)."""

from __future__ import annotations

import json
from typing import Any

import click

from ._connect import daemon, env_param, target, workdir
from ._render import when
from ._safe_text import visible


@click.group()
def memory() -> None:
    """What runs remember and recall: the entries of your and the project's memory files
    (MEMORY.md, which the remember tool appends to), each finished task with its answer,
    and summaries of long sessions. A run recalls the entries most like its task (the
    prompt's "similar memories" layer; an agent's `memory: off` turns it off) and the model
    can search them with the recall tool.

    \b
    Examples:
      roost memory search "how to run the tests"
      roost memory list --json
      roost memory forget 42
    """


def _scope(obj: dict[str, Any], client: Any, cwd: str | None, every: bool) -> dict[str, Any]:
    if every:
        return {"all": True}
    return {"cwd": workdir(target(obj), client, cwd), **env_param(target(obj))}


@memory.command()
@click.argument("query")
@click.option("--cwd", help="The folder whose project's memory is searched (default: here).")
@click.option("--all", "every", is_flag=True, help="Search every project's memory.")
@click.option("--limit", type=click.IntRange(min=1), default=10, show_default=True, help="Entries at most.")
@click.option("--json", "as_json", is_flag=True, help="Print the entries as JSON.")
@click.pass_obj
def search(obj: dict[str, Any], query: str, cwd: str | None, every: bool, limit: int, as_json: bool) -> None:
    """The entries that best match QUERY (any of its words; the best first): yours and this
    project's."""
    with daemon(obj) as client:
        entries = client.call("memory.search", query=query, limit=limit, **_scope(obj, client, cwd, every))["entries"]
    _show(entries, as_json, "nothing remembered matches that")


@memory.command("list")
@click.option("--cwd", help="The folder whose project's memory is listed (default: here).")
@click.option("--all", "every", is_flag=True, help="List every project's memory.")
@click.option("--limit", type=click.IntRange(min=1), default=100, show_default=True, help="Entries at most.")
@click.option("--json", "as_json", is_flag=True, help="Print the entries as JSON.")
@click.pass_obj
def listed(obj: dict[str, Any], cwd: str | None, every: bool, limit: int, as_json: bool) -> None:
    """The newest entries first: yours and this project's."""
    with daemon(obj) as client:
        entries = client.call("memory.list", limit=limit, **_scope(obj, client, cwd, every))["entries"]
    _show(entries, as_json, "nothing remembered yet: runs remember their tasks, and the remember tool writes MEMORY.md")


@memory.command()
@click.argument("entry", type=int)
@click.pass_obj
def forget(obj: dict[str, Any], entry: int) -> None:
    """Forget entry ENTRY for good (an entry of a memory file leaves the file too)."""
    with daemon(obj) as client:
        gone = client.call("memory.forget", id=entry)["forgotten"]
    click.echo(f"forgot {gone['id']}: {visible(gone['text'])[:100]}")


def _show(entries: list[dict[str, Any]], as_json: bool, empty: str) -> None:
    if as_json:
        click.echo(json.dumps(entries))
        return
    if not entries:
        click.echo(empty)
        return
    for entry in entries:
        click.echo(f"[{entry['id']}] {entry['kind']} · {visible(entry['source'])} · {when(entry['created'])}")
        click.echo(f"    {visible(entry['text'])}")
