"""``roost trust`` and ``roost untrust``: which project folders may widen what roost does."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from ._connect import daemon, env_param, target, workdir
from ._render import when
from ._safe_text import visible


@click.command()
@click.argument("folder", required=False)
@click.option("--yes", "-y", is_flag=True, help="Trust what is shown without asking (for scripts).")
@click.option("--list", "as_list", is_flag=True, help="List the trusted folders instead.")
@click.option("--json", "as_json", is_flag=True, help="Print what is shown (and done) as JSON.")
@click.pass_obj
def trust(obj: dict[str, Any], folder: str | None, yes: bool, as_list: bool, as_json: bool) -> None:
    """Trust a project folder (default: here): let its files widen what roost does.

    A repository's files can always narrow what roost does (deny and ask rules, fewer
    tools). What widens — MCP servers (.mcp.json, [mcp.servers]), hooks ([hooks] and
    Claude Code's .claude/settings.json and settings.local.json), allow rules, a
    guardrail switched off, providers and their URLs, the default model and aliases, agents
    that run without approvals or replace the default one — is ignored until you trust the
    folder. This command shows each such item and asks before it records the files' content,
    and the content of the project files a hook or an MCP server runs (a hook's
    .claude/hooks/check.sh, a server's server.py): when one of them changes afterwards (a git
    pull, a command), what it belongs to is ignored again until you trust it again.

    \b
    Examples:
      roost trust                 # show what this project's files would widen, then ask
      roost trust ~/src/app --yes
      roost trust --list
      roost untrust ~/src/app
    """
    with daemon(obj) as client:
        if as_list:
            _show_list(client.call("trust.list")["folders"], as_json)
            return
        cwd = workdir(target(obj), client, folder)
        shown = client.call("trust.show", cwd=cwd, **env_param(target(obj)))
        if as_json and not yes:
            click.echo(json.dumps(shown))
            return
        if not as_json:
            _show(shown)
        if shown["trusted"] and shown["current"]:
            if as_json:
                click.echo(json.dumps(shown))
            return
        if not yes:
            if not sys.stdin.isatty():
                raise click.ClickException("not a terminal to ask at: add --yes to trust what is shown")
            question = "Trust these files as they are now?" if shown["items"] else f"Trust {shown['folder']}?"
            if not click.confirm(question, default=False):
                click.echo("nothing was trusted")
                return
        done = client.call("trust.add", cwd=cwd, files=shown["files"], **env_param(target(obj)))
    if as_json:
        click.echo(json.dumps({**shown, "trusted": True, "current": True, "files": done["files"]}))
    else:
        click.echo(f"trusted {done['folder']}")


@click.command()
@click.argument("folder", required=False)
@click.pass_obj
def untrust(obj: dict[str, Any], folder: str | None) -> None:
    """Stop trusting a project folder (default: here): what its files widen is ignored again."""
    with daemon(obj) as client:
        gone = workdir(target(obj), client, folder)
        if folder is None:
            # Here means this project's root, as roost trust recorded it.
            gone = client.call("trust.show", cwd=gone)["folder"]
        done = client.call("trust.remove", folder=gone)
    if done["removed"]:
        click.echo(f"no longer trusted: {done['folder']}")
    else:
        click.echo(f"{done['folder']} was not trusted")


def _show(shown: dict[str, Any]) -> None:
    folder, items = shown["folder"], shown["items"]
    if not items:
        click.echo(f"{visible(folder)}: nothing in its files widens what roost does")
        return
    if shown["trusted"] and shown["current"]:
        click.echo(f"{visible(folder)} is trusted, and its files are as you trusted them:")
    elif shown["trusted"]:
        click.echo(f"{visible(folder)} is trusted, but files changed since; what they widen is ignored until you trust them again:")
    else:
        click.echo(f"{visible(folder)} is not trusted; its files would widen what roost does:")
    by_file: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        by_file.setdefault(item["source"], []).append(item)
    for source, found in by_file.items():
        state = "trusted" if all(i["trusted"] for i in found) else "not trusted"
        click.echo(f"\n  {_named(source, folder)}  ({state})")
        for item in found:
            _show_item(item, folder, shown["trusted"])
    broad = sum(len(item.get("warnings") or ()) for item in items)
    if broad:
        lines = f"{broad} line{'s' if broad > 1 else ''}"
        click.echo(click.style(f"\n{_WARN} marks what hands over more than it may seem to ({lines} above)", fg="yellow"))
    click.echo("")


#: The mark of a broad grant.
_WARN = "⚠"


def _show_item(item: dict[str, Any], folder: str, folder_trusted: bool) -> None:
    """One item: what it is, what it sets, the variables it reads, its broad grants, and
    the files it runs; each part escaped, so that nothing in it can hide another."""
    detail = f": {visible(item['detail'])}" if item["detail"] else ""
    since = {"new": "  [new since you trusted the folder]", "changed": "  [changed since you trusted the folder]"}
    mark = click.style(since[item["since"]], fg="yellow", bold=True) if item.get("since") in since else ""
    click.echo(f"    {item['kind']} {visible(item['name'])}{detail}{mark}")
    for value in item.get("values") or ():
        click.echo(f"      {visible(value['name'].replace('.', ' ', 1))} = {visible(value['value'])}")
    variables = item.get("variables") or ()
    if variables:
        names = ", ".join(v["name"] + (" (looks secret)" if v["secret"] else "") for v in variables)
        click.echo(f"      reads from your environment: {visible(names)}")
    for warning in item.get("warnings") or ():
        click.echo(click.style(f"      {_WARN} {visible(warning)}", fg="yellow"))
    for script in item.get("runs", []):
        note = _script_note(script, folder_trusted)
        click.echo(f"      runs {_named(script['path'], folder)}" + (f"  ({note})" if note else ""))


def _named(path: str, folder: str) -> str:
    """A path as shown: relative when in the folder, escaped."""
    return visible(os.path.relpath(path, folder) if path.startswith(folder + os.sep) else path)


def _script_note(script: dict[str, Any], folder_trusted: bool) -> str:
    """What to say of a file an item runs, beside its name."""
    if script["state"] == "unreadable":
        return "cannot be trusted: not a regular file, too large or unreadable"
    if not script.get("bound", True):
        return "not recorded yet: bound when you trust the folder again" if folder_trusted else ""
    if script["trusted"] or not folder_trusted:
        return {"missing": "missing", "outside": "a link out of the project"}.get(script["state"], "")
    return {"missing": "missing since you trusted it"}.get(script["state"], "changed since you trusted it")


def _show_list(folders: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({"folders": folders}))
        return
    if not folders:
        click.echo("no folder is trusted (roost trust DIR trusts one)")
        return
    for entry in folders:
        click.echo(f"{visible(entry['folder'])}  (trusted {when(entry['trusted_at'])})")
        for f in entry["files"]:
            click.echo(f"  {visible(f['path'])}  {_file_state(f)}")


def _file_state(f: dict[str, Any]) -> str:
    """A recorded file's state: a file a hook or server runs may be recorded as missing."""
    if f["current"]:
        return "missing, as trusted" if f["missing"] else "as trusted"
    if f["digest"] == "absent":
        return "created since: ignored until trusted again"
    return "missing: ignored until trusted again" if f["missing"] else "changed: ignored until trusted again"
