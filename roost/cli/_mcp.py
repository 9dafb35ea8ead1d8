"""``roost mcp``: the daemon's MCP servers (list, restart)."""

from __future__ import annotations

import json
from typing import Any

import click

from ._connect import daemon, env_param, local_socket, target, workdir
from ._render import untrusted
from ._safe_text import printable


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@click.pass_context
def mcp(ctx: click.Context, as_json: bool) -> None:
    """List the MCP servers configured for this folder: state, pid or URL, tools, last error.

    Servers come from [mcp.servers.NAME] in the user's config.toml and the project's
    .roost/config.toml, and from the project's .mcp.json. A project's servers start only in
    a folder you trusted (roost trust); until then they are listed as untrusted. The daemon
    starts a server when a session first needs its tools and restarts it when it dies. A server is what it runs
    (command, args, env, cwd; or URL, headers), not its name: folders whose configs name
    the same server share it, and another folder's server of the same name is another.

    \b
    Examples:
      roost mcp
      roost mcp --json | jq '.servers[] | select(.state == "failed")'
      roost mcp restart time
    """
    if ctx.invoked_subcommand is not None:
        return
    with daemon(ctx.obj) as client:
        listing = client.call("mcp.list", cwd=workdir(target(ctx.obj), client), **env_param(target(ctx.obj)))
    if as_json:
        click.echo(json.dumps(listing))
        return
    servers = listing["servers"]
    for problem in listing.get("problems", []):
        click.echo(printable(f"config: {problem}"), err=True)
    if not servers:
        click.echo("no MCP servers configured (add [mcp.servers.NAME] to config.toml, or a .mcp.json)")
        return
    for line in _table(servers):
        click.echo(line)
    if listing.get("untrusted"):
        click.echo(untrusted(listing["untrusted"]), err=True)


@mcp.command()
@click.argument("name")
@click.pass_obj
def restart(obj: dict[str, Any], name: str) -> None:
    """Restart the MCP server NAME is in this folder's config now (no backoff), and wait
    until it is ready or failed. Sessions of other folders that share that server see the
    restart too; another folder's server of the same name is not touched."""
    with daemon(obj) as client:
        here = {"cwd": workdir(target(obj), client), **env_param(target(obj))}
        client.call("mcp.restart", name=name, **here)
        servers = client.call("mcp.list", **here)["servers"]
    server = next((s for s in servers if s["name"] == name), None)
    if server is None:
        click.echo(printable(f"restarted {name}"))
    elif server["state"] == "failed":
        said = "".join(f"\n  {printable(line)}" for line in server.get("stderr", []))
        raise click.ClickException(printable(f"{name} failed to start: {server['error']} (log: {server['log']})") + said)
    else:
        click.echo(printable(f"{name}: {server['state']}, {server['tools']} tools"))


@mcp.command()
@click.option("--json", "as_json", is_flag=True, help="Print the resources as JSON.")
@click.pass_obj
def resources(obj: dict[str, Any], as_json: bool) -> None:
    """List the resources this folder's MCP servers offer, each as a task names it
    (@server:uri: its text is read and sent with the task). Servers not running yet are
    started (a project's only once you trusted it).

    \b
    Examples:
      roost mcp resources
      roost dispatch "summarize @docs:file://guide.md"
    """
    with daemon(obj) as client:
        listing = client.call("mcp.resources", cwd=workdir(target(obj), client), **env_param(target(obj)))
    if as_json:
        click.echo(json.dumps(listing))
        return
    found = listing["resources"]
    if not found:
        click.echo("no MCP resources here (roost mcp shows the servers)")
    width = max((len(printable(r["reference"])) for r in found), default=0)
    for resource in found:
        about = " · ".join(printable(v) for v in (resource["name"], resource.get("mime_type") or "", resource.get("description") or "") if v)
        click.echo(f"{printable(resource['reference']):<{width}}  {about}".rstrip())
    if listing.get("untrusted"):
        click.echo(untrusted(listing["untrusted"]), err=True)


def _table(servers: list[dict[str, Any]]) -> list[str]:
    """The servers as rows whose columns are as wide as their longest value (a long name
    or URL shifts the columns, never breaks them), each failed or lost stdio server
    followed by its last stderr lines."""
    rows = [
        (
            printable(s["name"]),
            s["state"] if s.get("enabled", True) else "disabled",
            str(s["tools"]),
            printable(s.get("url") or (f"pid {s['pid']}" if s.get("pid") else "-")),
            printable(s.get("error") or ""),
            s.get("stderr") or [],
        )
        for s in servers
    ]
    head = ("NAME", "STATE", "TOOLS", "PID / URL")
    widths = [max(len(head[i]), *(len(row[i]) for row in rows)) for i in range(4)]
    name, state, tools, where = widths

    def line(cells: tuple[str, ...]) -> str:
        return f"{cells[0]:<{name}}  {cells[1]:<{state}}  {cells[2]:>{tools}}  {cells[3]:<{where}}  {cells[4]}".rstrip()

    lines = [line((*head, "ERROR"))]
    for row in rows:
        lines.append(line(row[:5]))
        lines += [f"    | {printable(said)}" for said in row[5]]
    return lines


@mcp.command("serve")
@click.option("--port", type=click.IntRange(1, 65535), help="Serve streamable HTTP on 127.0.0.1:PORT (a bearer token required).")
@click.option("--unix", "unix", type=click.Path(dir_okay=False), help="Serve streamable HTTP on this Unix socket (yours alone).")
@click.option("--token-file", type=click.Path(dir_okay=False), help="With --port: the bearer token is read from (or written to) this file.")
@click.pass_obj
def serve(obj: dict[str, Any], port: int | None, unix: str | None, token_file: str | None) -> None:
    """Serve roost to another agent as an MCP server: on stdin/stdout, or over streamable
    HTTP (endpoint /mcp) on a loopback port or a Unix socket.

    Its tools run tasks in the daemon (roost_dispatch waits for the result, roost_start and
    roost_status poll it), list sessions and read a run's report. The calling agent names
    a task, a folder, an agent, a model and plan or agent mode; the rules and trust are
    yours: a call the run must ask about waits for your approval (roost approve, the
    shell), and the calling agent is told the command. Local daemon only (no --host).

    Over HTTP, what reaches the endpoint runs tasks as you: a Unix socket is made for you
    alone (mode 0600), and a loopback port, which any user of this machine can reach, takes
    only requests with the bearer token (made for the run unless --token-file names one,
    kept in a file only you can read; its path is printed).

    \b
    Examples:
      claude mcp add roost -- roost mcp serve
      roost mcp serve --unix ~/.roost-mcp.sock
      roost mcp serve --port 8765 --token-file ~/.config/roost/mcp-token
    """
    if port is not None and unix is not None:
        raise click.UsageError("--port or --unix, not both")
    if token_file is not None and port is None:
        raise click.UsageError("--token-file goes with --port")
    socket = local_socket(obj, "roost mcp serve")
    from ._mcp_serve import serve as serve_mcp

    serve_mcp(socket, port=port, unix=unix, token_file=token_file)
