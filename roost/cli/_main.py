"""The ``roost`` command: a thin client of the daemon (imports roost.protocol and click only).

Each command's module is imported when that command runs (or ``--help`` lists them all),
so ``roost --version`` imports click alone and ``roost status`` click, the protocol and
its own module: start-up is what click costs (bench/status_cli.py).
"""

from __future__ import annotations

import importlib
import os
import sys

import click

import roost

#: Command name -> (module under roost.cli, attribute).
_COMMANDS: dict[str, tuple[str, str]] = {
    "shell": ("shell", "shell"),
    "attach": ("shell", "attach"),
    "dispatch": ("_run", "dispatch"),
    "chat": ("_models", "chat"),
    "sessions": ("_sessions", "sessions"),
    "logs": ("_sessions", "logs"),
    "fork": ("_sessions", "fork"),
    "gc": ("_sessions", "gc"),
    "export": ("_export", "export"),
    "import": ("_export", "import_"),
    "report": ("_report", "report"),
    "bridge": ("_bridge", "bridge"),
    "steer": ("_run", "steer"),
    "abort": ("_run", "abort"),
    "providers": ("_models", "providers"),
    "status": ("_daemon", "status"),
    "stop": ("_daemon", "stop"),
    "daemon": ("_daemon", "daemon"),
    "approve": ("_approvals", "approve"),
    "deny": ("_approvals", "deny"),
    "answer": ("_approvals", "answer"),
    "pending": ("_approvals", "pending"),
    "agents": ("_agents", "agents"),
    "commands": ("_agents", "commands"),
    "prompt": ("_agents", "prompt"),
    "compact": ("_agents", "compact"),
    "plugins": ("_plugins", "plugins"),
    "mcp": ("_mcp", "mcp"),
    "memory": ("_memory", "memory"),
    "schedule": ("_schedule", "schedule"),
    "trust": ("_trust", "trust"),
    "acp": ("_acp", "acp"),
    "untrust": ("_trust", "untrust"),
}


class _Commands(click.Group):
    """A group whose commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _COMMANDS:
            return None
        module, attr = _COMMANDS[cmd_name]
        command: click.Command = getattr(importlib.import_module(f"{__package__}.{module}"), attr)
        return command

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and name not in _COMMANDS and not name.startswith("-") and not ctx.resilient_parsing:
            # click suggests from the commands it holds; ours are imported on first use.
            raise click.exceptions.NoSuchCommand(name, possibilities=list(_COMMANDS), ctx=ctx)
        return super().resolve_command(ctx, args)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]}, invoke_without_command=True)
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
        shell = cli.get_command(ctx, "shell")
        assert shell is not None
        with shell.make_context("shell", [], parent=ctx) as sub:
            shell.invoke(sub)


def main() -> None:
    """Entry point of the ``roost`` script."""
    try:
        cli()
    except Exception as exc:
        # Only a command that talked to the daemon can raise these: the protocol is
        # imported by then, and is not imported for the commands that do not.
        if "roost.protocol" not in sys.modules:
            raise
        from roost.protocol import ConnectionClosed, RoostError, Timeout

        from ._connect import EXIT_REFUSED, daemon_log
        from ._safe_text import printable

        # A refusal may quote a project's file (a config that does not parse), ssh or the
        # remote side: printable only.
        if isinstance(exc, ConnectionClosed):
            # Over ssh the message says what ssh and the remote side last said.
            click.echo(printable(f"roost: {exc}"), err=True)
        elif isinstance(exc, Timeout):
            # A daemon reached over ssh (its URL is in the message) logs on its own machine.
            log = "in ~/.local/state/roost/log/ there" if " at ssh://" in str(exc) else daemon_log()
            click.echo(printable(f"roost: {exc}; is it stuck? Its log is {log}"), err=True)
        elif isinstance(exc, RoostError):
            click.echo(printable(f"roost: {exc}"), err=True)
        else:
            raise
        sys.exit(EXIT_REFUSED)
