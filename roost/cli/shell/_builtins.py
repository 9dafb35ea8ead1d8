"""What the built-in slash commands do (their table, parsing and completion: :mod:`._slash`).

``/NAME ARG`` runs ``Builtins._cmd_NAME(ARG)``; a prefix of one name is that command. The
commands that go to another session (``/switch``, ``/new``, ``/rewind``) put a new view in
place before attaching to it. Methods the daemon may not have yet (agents, reports, prompts,
compaction, forks) are looked up in its ``hello`` catalogue; without one, the shell says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from roost.protocol import MODES

from .._connect import env_param
from .._report import report_rows
from . import _display as r
from ._slash import COMMANDS, SCOPES, closest, find
from ._transcript import Transcript
from ._view import SessionView

if TYPE_CHECKING:
    from roost.protocol.asyncio_client import AsyncClient

    from ._shell import Shell

#: The API level from which ``detach`` takes why a shell leaves its session.
_REASONS_LEVEL = 13


def detach_params(client: AsyncClient, session: str, reason: str | None) -> dict[str, Any]:
    """``detach``'s params for leaving ``session``, with why, as Claude Code's SessionEnd
    hooks are told (``clear``, ``resume``, ``prompt_input_exit``), where the daemon takes it."""
    known = reason is not None and client.info.get("api_level", 0) >= _REASONS_LEVEL
    return {"session": session, **({"reason": reason} if known else {})}


class Builtins:
    """The built-in slash commands of one shell."""

    def __init__(self, shell: Shell) -> None:
        self._shell = shell

    async def run(self, name: str, arg: str) -> None:
        """Run ``/name arg`` (``name`` as typed: a unique prefix will do)."""
        matches = find(name)
        if len(matches) != 1:
            if matches:
                known = "it may be " + ", ".join("/" + c.name for c in matches)
            else:
                near = closest(name, [c for c, _, _ in self._shell.names.commands])
                known = ("did you mean " + " or ".join("/" + n for n in near) + "? " if near else "") + "/help lists them"
            self._shell.screen.print(r.note(f"unknown command /{name}: {known}", "class:error"))
            return
        await getattr(self, "_cmd_" + matches[0].name)(arg)

    async def _cmd_help(self, arg: str) -> None:
        shell = self._shell
        # The folder's commands as they are now (files may have changed since connecting).
        await shell.keeper.refresh_commands(await shell.keeper.ready())
        builtins = [
            (c.name, c.args, c.doc + (f" (also {', '.join('/' + a for a in c.aliases)})" if c.aliases else ""))
            for c in COMMANDS
        ]
        shell.screen.print(r.help_lines(builtins, shell.names.commands))

    # -- what the next tasks run with ----------------------------------------------------------

    async def _cmd_agent(self, arg: str) -> None:
        shell = self._shell
        if not arg:
            shell.screen.print(r.note(f"agent: {shell.choices.agent or shell.view.agent or 'default'}; "
                                      f"known: {', '.join(shell.names.agents)}"))
            return
        client = await shell.keeper.ready()
        if client.has("agents.list") and arg not in shell.names.agents:
            shell.screen.print(r.note(f"no agent {arg!r}; known: {', '.join(shell.names.agents)}", "class:error"))
            return
        shell.choices.agent = arg
        shell.screen.print(r.note(f"(the next tasks run with agent {arg})"))

    async def _cmd_mode(self, arg: str) -> None:
        shell = self._shell
        if arg not in MODES:
            shell.screen.print(r.note(f"mode is one of {', '.join(MODES)}", "class:error"))
            return
        shell.choices.mode = arg
        shell.screen.print(r.note(f"(the next tasks run in mode {arg})"))

    async def _cmd_model(self, arg: str) -> None:
        shell = self._shell
        if not arg:
            shell.screen.print(r.note(f"model: {shell.choices.model or shell.view.model or 'the default'}"))
            return
        client = await shell.keeper.ready()
        if client.info.get("api_level", 0) >= 12:
            # Checked now, where the next task would run, rather than failing that task (an
            # older daemon has no such check).
            params = {"cwd": shell.cwd(), "model": arg, **env_param(shell.target)}
            checked = (await client.call("providers.list", params)).get("model") or {}
            if checked.get("problem"):
                shell.screen.print(r.note(f"not changed: {checked['problem']}", "class:error"))
                return
        shell.choices.model = arg
        shell.screen.print(r.note(f"(the next tasks use model {arg})"))

    # -- sessions ------------------------------------------------------------------------------

    async def _cmd_sessions(self, arg: str) -> None:
        shell = self._shell
        rows = await shell.keeper.refresh_sessions(await shell.keeper.ready())
        shell.screen.print(r.sessions_table(rows, shell.view.session))

    async def _cmd_switch(self, arg: str) -> None:
        shell = self._shell
        rows = await shell.keeper.refresh_sessions(await shell.keeper.ready())
        ids = [row["id"] for row in rows]
        matches = [i for i in ids if i == arg] or [i for i in ids if arg and i.startswith(arg)]
        if len(matches) != 1:
            shell.screen.print(r.note(f"{len(matches) or 'no'} sessions match {arg!r} (/sessions lists them)",
                                      "class:error"))
            return
        (row,) = [row for row in rows if row["id"] == matches[0]]
        await self._switch(row["id"], row.get("cwd", ""), "resume")

    async def _cmd_new(self, arg: str) -> None:
        shell = self._shell
        client = await shell.keeper.ready()
        created = await client.call("sessions.create", cwd=shell.home)
        # Claude Code's /clear ends its session: so does this shell's, for its hooks.
        await self._switch(created["session"], shell.home, "clear")

    async def _cmd_rewind(self, arg: str) -> None:
        shell = self._shell
        # A fork of this session at the end of the task before the last N: the session
        # itself stays as it is (/switch goes back to it), and a run in flight goes on there.
        if arg and not (arg.isdigit() and int(arg) > 0):
            shell.screen.print(r.note("/rewind takes how many tasks to go back: /rewind 2", "class:error"))
            return
        n = int(arg or 1)
        tasks = shell.view.task_seqs
        if len(tasks) < n:
            shell.screen.print(r.note(f"(this session has {len(tasks)} tasks)", "class:error"))
            return
        client = await shell.keeper.ready()
        if not client.has("sessions.fork"):
            shell.screen.print(r.note("this daemon has no sessions.fork method yet (a newer roost will)"))
            return
        old = shell.view.session
        fork = await client.call("sessions.fork", session=old, at=tasks[-n] - 1)
        await self._switch(fork["session"], shell.view.cwd)
        shell.screen.print(r.note(f"(rewound {n} task{'s' if n > 1 else ''}: this is {fork['session']}, a fork of "
                                  f"{old} at seq {fork['forked_at']}; /switch {old} goes back)"))

    async def _switch(self, session: str, cwd: str, reason: str | None = None) -> None:
        """Go to ``session``; the one left ends, for its SessionEnd hooks, if ``reason``
        says why (a fork leaves it going on)."""
        shell = self._shell
        client = await shell.keeper.ready()
        if session == shell.view.session:
            shell.screen.print(r.note("(already here)"))
            return
        old = shell.view.session
        shell.screen.print(shell.transcript.finish())
        # The new view is in place before the attach is sent, so every event of the new
        # session finds it; the old session's stragglers no longer match and are dropped.
        shell.view = SessionView(session, cwd)
        shell.transcript = Transcript(width=shell.screen.width, expand_reasoning=shell.transcript.expand_reasoning)
        shell.requests.settle()
        await client.call("detach", detach_params(client, old, reason))
        await client.call("attach", session=session, since=0)
        await shell.keeper.refresh_commands(client)
        await shell.keeper.refresh_sessions(client)

    # -- the run and its requests ------------------------------------------------------------

    async def _cmd_abort(self, arg: str) -> None:
        if not self._shell.abort_if_running():
            self._shell.screen.print(r.note("(no run in flight)"))

    async def _cmd_approve(self, arg: str) -> None:
        scope = arg or "once"
        if scope not in SCOPES:
            self._shell.screen.print(r.note(f"approve {' or '.join(SCOPES)}", "class:error"))
            return
        await self._shell.requests.approve(scope)

    async def _cmd_deny(self, arg: str) -> None:
        await self._shell.requests.deny(arg)

    # -- what the daemon tells ---------------------------------------------------------------

    async def _cmd_compact(self, arg: str) -> None:
        shell = self._shell
        params = {"session": shell.view.session, **env_param(shell.target)}
        if arg:
            # As Claude Code's /compact [instructions] (a daemon older than API level 13
            # refuses the param, saying so).
            params["instructions"] = arg
        await self._optional("compact", params)

    async def _cmd_prompt(self, arg: str) -> None:
        shell = self._shell
        params = {"session": shell.view.session}
        # What the next run from this shell would get.
        for key in ("agent", "mode"):
            value = getattr(shell.choices, key)
            if value:
                params[key] = value
        await self._optional("prompt", params, r.prompt_layers)

    async def _cmd_report(self, arg: str) -> None:
        view = self._shell.view
        # The daemon folds the stored events: the same report as `roost report`.
        stats = view.run or view.last_run
        params = {"session": view.session, **({"run": stats.run} if stats else {})}
        await self._optional("report", params, lambda found: r.table(report_rows(found)))

    async def _cmd_detach(self, arg: str) -> None:
        self._shell.detach()

    async def _optional(self, method: str, params: dict[str, Any],
                        show: Callable[[dict[str, Any]], r.Lines] = r.mapping) -> None:
        shell = self._shell
        client = await shell.keeper.ready()
        if not client.has(method):
            shell.screen.print(r.note(f"this daemon has no {method} method yet (a newer roost will)"))
            return
        result = await client.call(method, params)
        shell.screen.print(show(result) if isinstance(result, dict) else r.note(str(result)))
