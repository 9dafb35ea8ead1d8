"""``roost plugins``: the user's Claude Code plugins for this folder and what each brings."""

from __future__ import annotations

import json
from typing import Any

import click

from ._connect import daemon, env_param, target, workdir
from ._safe_text import printable


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.pass_obj
def plugins(obj: dict[str, Any], as_json: bool) -> None:
    """List the Claude Code plugins installed for you (~/.claude/plugins, as Claude Code
    installs them): version, marketplace, whether enabledPlugins in your settings or this
    project's turns each on, the agents, /commands, skills, hooks and MCP servers it brings
    here, and what is wrong with it."""
    where = target(obj)
    with daemon(obj) as client:
        result = client.call("plugins.list", cwd=workdir(where, client), **env_param(where))
    if as_json:
        click.echo(json.dumps(result))
        return
    if not result["plugins"]:
        click.echo("no plugins installed (Claude Code's ~/.claude/plugins)")
    for plugin in result["plugins"]:
        by = f" by {plugin['enabled_by']}" if plugin.get("enabled_by") else ""
        if not plugin["root"]:
            state = f"enabled{by}, but not found"
        elif plugin["enabled"]:
            state = f"enabled{by}"
        else:
            state = f"installed, turned off{by}" if by else "installed, not enabled"
        version = f" {plugin['version']}" if plugin.get("version") else ""
        # Names, descriptions and problems come from the plugins' files: printable only.
        head = click.style(printable(plugin["name"]), bold=True) + printable(f"{version} @ {plugin['marketplace']}  ({state})")
        click.echo(head)
        if plugin.get("description"):
            click.echo(printable(f"  {plugin['description'].splitlines()[0]}"))
        for label, key, mark in (("agents", "agents", ""), ("commands", "commands", "/"), ("skills", "skills", ""),
                                 ("MCP servers", "mcp_servers", "")):
            if plugin[key]:
                click.echo(printable(f"  {label}: " + ", ".join(mark + name for name in plugin[key])))
        for hook in plugin["hooks"]:
            click.echo(printable(f"  hook {hook}"))
        if plugin.get("root"):
            click.echo(click.style(printable(f"  {plugin['root']}"), dim=True))
        for problem in plugin["problems"]:
            click.echo(click.style(printable(f"  problem: {problem}"), fg="yellow"))
    for problem in result["problems"]:
        click.echo(click.style(printable(f"problem: {problem}"), fg="yellow"), err=True)
    for item in result["untrusted"]:
        line = f"{item['source']} turns on {item['name']}, but it is not trusted: roost trust to let it"
        click.echo(click.style(printable(line), fg="yellow"), err=True)
