"""The ``roost`` command: a thin client of the daemon (imports roost.protocol and click only)."""

from __future__ import annotations

import os
import sys

import click

import roost
from roost.protocol import ConnectionClosed, RoostError, Timeout

from ._agents import agents, compact, prompt
from ._approvals import answer, approve, deny, pending
from ._bridge import bridge
from ._connect import EXIT_REFUSED, daemon_log
from ._mcp import mcp
from ._daemon import daemon, status, stop
from ._export import export, import_
from ._models import chat, providers
from ._report import report
from ._run import abort, dispatch, steer
from ._sessions import fork, gc, logs, sessions
from ._trust import trust, untrust
from .shell import attach, shell


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, invoke_without_command=True)
@click.version_option(roost.__version__, prog_name="roost")
@click.option("--socket", envvar="ROOST_SOCKET", help="Daemon socket path.  [env: ROOST_SOCKET]")
@click.option(
    "--host", envvar="ROOST_HOST", metavar="URL|NAME",
    help="The daemon of another machine, over ssh: ssh://[user@]host[:port], or a [hosts.NAME] of config.toml.  [env: ROOST_HOST]",
)
@click.pass_context
def cli(ctx: click.Context, socket: str | None, host: str | None) -> None:
    """roost: a local-first agent runtime.

    One daemon per user runs every agent session; these commands talk to it (and start it
    when it is not running). Runs go on when the terminal closes.

    With no command, opens the interactive shell on a new session here (roost shell).

    A daemon that stays silent for ROOST_TIMEOUT seconds (default 30; 0: no limit) is an
    error (exit status 10), not a hang; a long answer from a working daemon is waited for.

    With --host (ROOST_HOST), every command talks to that machine's daemon through ssh
    (`ssh HOST roost bridge`; ROOST_SSH_COMMAND replaces ssh and its options), and --cwd
    names a folder there. No local daemon is started.

    \b
    Try it offline:
      roost dispatch "list the files here and count them" --model scripted/demo
    """
    ctx.obj = {"socket": socket, "host": host or None}
    if os.environ.get("NO_COLOR"):
        # https://no-color.org: plain output however it is printed (piped output is anyway).
        ctx.color = False
    if ctx.invoked_subcommand is None:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            click.echo(ctx.get_help())
            return
        with shell.make_context("shell", [], parent=ctx) as sub:
            shell.invoke(sub)


for command in (shell, attach, dispatch, chat, sessions, logs, fork, steer, abort, providers, status, stop, daemon):
    cli.add_command(command)
for command in (approve, deny, answer, pending, agents, prompt, compact, mcp, trust, untrust, export, import_, report, gc, bridge):
    cli.add_command(command)


def main() -> None:
    """Entry point of the ``roost`` script."""
    try:
        cli()
    except ConnectionClosed as exc:
        # Over ssh the message says what ssh and the remote side last said.
        click.echo(f"roost: {exc}", err=True)
        sys.exit(EXIT_REFUSED)
    except Timeout as exc:
        # A daemon reached over ssh (its URL is in the message) logs on its own machine.
        log = "in ~/.local/state/roost/log/ there" if " at ssh://" in str(exc) else daemon_log()
        click.echo(f"roost: {exc}; is it stuck? Its log is {log}", err=True)
        sys.exit(EXIT_REFUSED)
    except RoostError as exc:
        click.echo(f"roost: {exc}", err=True)
        sys.exit(EXIT_REFUSED)
