"""Commands about what a run is made of: agents, slash commands, the system prompt it
gets, and the history it carries (compact)."""

from __future__ import annotations

import json
from typing import Any

import click

from roost.protocol import MODES

from ._connect import daemon, env_param, resolve_session, target, workdir
from ._follow import follow
from ._exits import exit_status
from ._safe_text import printable, visible


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.pass_obj
def agents(obj: dict[str, Any], as_json: bool) -> None:
    """List the agents for this folder: built-in, user (~/.claude/agents,
    ~/.config/roost/agents) and project (.claude/agents, .roost/agents, subfolders too),
    with where each came from, the files skipped, and tool names roost has no tool for.
    A project's agent that widens what roost does (mode full or exec, allow rules, the name
    default) is listed as not trusted until you trust the folder (roost trust); with --json
    each agent has trusted: true or false."""
    with daemon(obj) as client:
        result = client.call("agents.list", cwd=workdir(target(obj), client))
    if as_json:
        click.echo(json.dumps(result))
        return
    for agent in result["agents"]:
        if agent.get("trusted") is False:
            _untrusted(agent)
            continue
        extras = [f"mode {agent['mode']}"] if agent.get("mode") else []
        if agent.get("model"):
            resolved = agent.get("model_id")
            extras.append(agent["model"] + (f" = {resolved}" if resolved and resolved != agent["model"] else ""))
        if agent.get("tools") is not None:
            extras.append("tools: " + ", ".join(agent["tools"]))
        click.echo(click.style(printable(agent["name"]), bold=True) + printable(f"  ({'; '.join(extras)})" if extras else ""))
        size = ""
        if agent.get("description"):
            click.echo(printable(f"  {agent['description'].splitlines()[0]}"))
            # What the task tool's list carries of it with every model call.
            size = f" · description {len(' '.join(agent['description'].split())):,} chars"
        click.echo(click.style(printable(f"  {agent['source']}{size}"), dim=True))
    for problem in result["problems"]:
        click.echo(click.style(printable(f"skipped: {problem}"), fg="yellow"), err=True)
    for agent in result["agents"]:
        if agent.get("unknown_tools"):
            line = f"{agent['name']}: tools roost does not have: {', '.join(agent['unknown_tools'])}"
            click.echo(click.style(printable(line) + " (its runs go without them)", fg="yellow"), err=True)


def _untrusted(agent: dict[str, Any]) -> None:
    """A project's agent that waits for trust: what it would widen; no run gets it."""
    name = click.style(visible(agent["name"]), bold=True)
    click.echo(name + click.style(f"  (not trusted: {visible(agent.get('widens') or 'it widens')})", fg="yellow"))
    for warning in agent.get("warnings") or ():
        click.echo(click.style(f"  ⚠ {visible(warning)}", fg="yellow"))
    click.echo(click.style(f"  {visible(agent['source'])} · no run gets it until you trust the folder (roost trust)", dim=True))


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.pass_obj
def commands(obj: dict[str, Any], as_json: bool) -> None:
    """List the slash commands for this folder: Claude Code's command files (user
    ~/.claude/commands, project .claude/commands), skills and the prompts of its MCP
    servers (/mcp__server__prompt), each with its source, what it is for and the arguments
    it takes, and the files skipped, one line each.

    \b
    Type one as the task: roost dispatch "/review src/app.py speed"
    """
    with daemon(obj) as client:
        result = client.call("commands.list", cwd=workdir(target(obj), client), **env_param(target(obj)))
    if as_json:
        click.echo(json.dumps(result))
        return
    for command in result["commands"]:
        typed = "/" + (command.get("short") or command["name"])
        hint = f" {command['argument_hint']}" if command.get("argument_hint") else ""
        kind = command.get("kind", "command")
        kind = kind if kind.startswith(command["scope"]) else f"{command['scope']} {kind}"
        click.echo(click.style(printable(typed), bold=True) + printable(hint) + click.style(printable(f"  ({kind})"), dim=True))
        if command.get("description"):
            click.echo(printable(f"  {command['description'].splitlines()[0]}"))
        click.echo(click.style(printable(f"  {command['source']}"), dim=True))
    for problem in result["problems"]:
        click.echo(click.style(printable(f"skipped: {problem}"), fg="yellow"), err=True)


@click.command()
@click.argument("session", required=False)
@click.option("--agent", "-a", help="Show it for this agent (default: the session's last).")
@click.option("--mode", type=click.Choice(MODES), help="Show it for this mode.")
@click.option("--task", "-t", help="With the similar memories a run of this task recalls.")
@click.option("--json", "as_json", is_flag=True, help="Print the layers as JSON.")
@click.pass_obj
def prompt(obj: dict[str, Any], session: str | None, agent: str | None, mode: str | None, task: str | None, as_json: bool) -> None:
    """Show the system prompt a run in SESSION (or in this folder) gets, its layers marked.

    Layers come stable first (agent, mode, bootstrap, instructions, skills, memory, repo map,
    summary) so that a provider's prompt cache covers the longest prefix; a run's similar
    memories, recalled for its task, come last (--task shows them).
    """
    with daemon(obj) as client:
        params: dict[str, Any] = (
            {"session": resolve_session(client, session)} if session else {"cwd": workdir(target(obj), client)}
        )
        for key, value in (("agent", agent), ("mode", mode), ("task", task)):
            if value:
                params[key] = value
        result = client.call("prompt", params)
    if as_json:
        click.echo(json.dumps(result))
        return
    for layer in result["layers"]:
        source = f" · {layer['source']}" if layer.get("source") else ""
        # The layers hold the project's files (CLAUDE.md, AGENTS.md, skills): printable only.
        click.echo(click.style(printable(f"── {layer['name']} ({layer['chars']:,} chars{source})"), fg="cyan", bold=True))
        click.echo(printable(layer["text"].rstrip()))
    total = sum(layer["chars"] for layer in result["layers"])
    click.echo(click.style(f"── {total:,} chars in all · agent {result['agent']} · {result['mode']} mode", dim=True))


@click.command()
@click.argument("session")
@click.option("--model", "-m", help="The model that summarizes (default: the session's last).")
@click.option("--keep-turns", type=click.IntRange(min=1), help="Recent replies kept whole (default 6).")
@click.option("--instructions", "-i", help="What the summary should keep or stress, as Claude Code's /compact TEXT.")
@click.pass_obj
def compact(obj: dict[str, Any], session: str, model: str | None, keep_turns: int | None, instructions: str | None) -> None:
    """Summarize SESSION's older history now; later runs see the summary instead.

    Runs also compact on their own when a model call would fill most of the model's
    context window ([compaction] and [context_windows] in config.toml).
    """
    with daemon(obj) as client:
        params: dict[str, Any] = {"session": resolve_session(client, session), "attach": True, **env_param(target(obj))}
        if model:
            params["model"] = model
        if keep_turns:
            params["keep_turns"] = keep_turns
        if instructions:
            params["instructions"] = instructions
        started = client.call("compact", params)
        done: dict[str, Any] = {}

        def on_event(event: dict[str, Any]) -> None:
            if event.get("type") == "compacted":
                done["compacted"] = event
            elif event.get("type") == "error":
                click.echo(printable(f"error: {event.get('message')}"), err=True)

        finished = follow(client, started["session"], on_event, since=0, until_run=started["run"], attached=True)
    if finished is None:
        raise SystemExit(1)
    click.echo(printable(str(finished.get("text") or finished.get("reason"))))
    if "compacted" in done:
        click.echo(click.style(printable(done["compacted"]["summary"]), dim=True))
    raise SystemExit(exit_status(finished["reason"]))
