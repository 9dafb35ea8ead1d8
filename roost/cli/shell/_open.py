"""The commands that open the shell: ``roost shell`` (and bare ``roost``) and ``roost attach``.

They reach the daemon with the blocking client first (starting it if needed, as every
command does, and turning refusals into plain errors before anything is drawn), pick the
session, and only then import prompt_toolkit and run the shell.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

import click

from roost.protocol import MODES

from .._connect import DaemonError, Target, call_timeout, connect, resolve_session, target, used_last, workdir


def _choices(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option("--agent", "-a", help="Agent for the tasks typed here (default: the daemon's).")(command)
    command = click.option("--mode", type=click.Choice(MODES), help="Run mode for the tasks typed here (default: agent).")(command)
    return click.option(
        "--model", "-m", envvar="ROOST_MODEL",
        help="provider/model or an alias for the tasks typed here.  [env: ROOST_MODEL]",
    )(command)


@click.command()
@_choices
@click.pass_obj
def shell(obj: dict[str, Any], model: str | None, mode: str | None, agent: str | None) -> None:
    """Open the interactive shell on a new session in this directory (also: bare `roost`).

    Type a task and press Enter; while it runs, what you type steers it. /help lists the
    commands. Ctrl-C aborts a run; Ctrl-D (or Ctrl-C at an empty prompt) detaches, and the
    run goes on in the daemon: `roost attach` comes back to it.

    \b
    Examples:
      roost
      roost shell --model scripted/demo
    """
    _need_terminal()
    where = target(obj)
    with connect(where) as client:
        cwd = workdir(where, client)
        session = client.call("sessions.create", cwd=cwd)["session"]
    _run(where, session, cwd, cwd, model=model, mode=mode, agent=agent)


@click.command()
@click.argument("session", required=False)
@_choices
@click.pass_obj
def attach(obj: dict[str, Any], session: str | None, model: str | None, mode: str | None, agent: str | None) -> None:
    """Open the shell on SESSION (id or unique prefix): its history, then live.

    Without SESSION: the session of this directory used last (with --host: the one used
    last there). Any number of terminals can attach to one session; they see the
    same stream, and any of them can type or answer.

    \b
    Examples:
      roost attach 3f2a
      roost attach
    """
    _need_terminal()
    where = target(obj)
    with connect(where) as client:
        rows = client.call("sessions.list")["sessions"]
        home = workdir(where, client)
        if session:
            session = resolve_session(client, session)
        else:
            here = rows if where.host is not None else [row for row in rows if _same_dir(row["cwd"], home)]
            if not here:
                raise DaemonError("no session in this directory yet: `roost` starts one, `roost sessions` lists them")
            session = used_last(here)["id"]
    (row,) = [row for row in rows if row["id"] == session]
    _run(where, session, row["cwd"], home, model=model, mode=mode, agent=agent)


def _run(where: Target, session: str, cwd: str, home: str, **choices: str | None) -> None:
    """Run the shell on ``session`` (whose folder is ``cwd``); ``/new`` makes sessions in
    ``home`` (here, or the remote default folder)."""
    # prompt_toolkit is imported here, so the other commands never pay for it.
    from ._app import history_file
    from ._shell import Choices, Shell

    async def main() -> Shell:
        shell = Shell(target=where, session=session, cwd=cwd, home=home, choices=Choices(**choices),
                      history=history_file(), timeout=call_timeout())
        await shell.run()
        return shell

    try:
        # Imported here: asyncio (~20 ms) is for the shell alone, not every command.
        import asyncio

        shell = asyncio.run(main())
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    if shell.farewell:
        click.echo(shell.farewell, err=bool(shell.status))
    raise SystemExit(shell.status)


def _need_terminal() -> None:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise click.UsageError("the shell needs a terminal; for scripts use `roost dispatch` (roost --help)")


def _same_dir(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)
