"""The shell: one session's events in, what the person types out.

Events arrive on the connection, are folded into the :class:`SessionView` (status, open
requests, figures) and the :class:`Transcript` (lines to commit), and the screen is told.
What is typed is a task (``dispatch``), or steering while a run is in flight (``steer``), a
slash command (built in, or a custom one: ``/name args`` goes to ``dispatch`` as it is typed,
and the daemon expands it), or the answer to an open approval or question.

The :class:`Shell` holds what its parts share (the session's view and transcript, the
screen, the names completion offers, the choices for the next tasks) and is the controller
the screen asks; its parts do one job each, on that state: :class:`ConnectionKeeper` (staying
connected, and the tasks that ask the daemon), :class:`OpenRequests` (approvals, questions
and trusting a folder) and :class:`Builtins` (the built-in slash commands).
"""

from __future__ import annotations

import asyncio
import time
import traceback
from dataclasses import dataclass
from typing import Any

from roost.protocol import DEFAULT_TIMEOUT, ConnectionClosed, ErrorCode, RpcError, Timeout

from .. import _approval_keys as keys
from .._connect import Target, env_param
from . import _display as r
from ._app import Screen
from ._builtins import Builtins, detach_params
from ._complete import Names, ShellCompleter
from ._keeper import ConnectionKeeper
from ._requests import OpenRequests
from ._slash import builtin, closest, parse
from ._transcript import Transcript
from ._view import SessionView


@dataclass(slots=True)
class Choices:
    """What this shell asks for when it dispatches (None: the daemon's default)."""

    model: str | None = None
    mode: str | None = None
    agent: str | None = None


class Shell:
    """An interactive shell on one session (it can switch to another).

    Resource handling:
        :meth:`run` owns the connection, the screen and every task it starts; all are
        closed when it returns.
    """

    def __init__(self, *, target: Target, session: str, cwd: str, home: str, choices: Choices,
                 history: str | None, timeout: float | None = DEFAULT_TIMEOUT) -> None:
        #: Where the daemon is (this machine's socket, or a host over ssh).
        self.target = target
        #: The folder ``/new`` makes sessions in (here; on a remote host, its default folder).
        self.home = home
        self.choices = choices
        self.view = SessionView(session, cwd)
        self.transcript = Transcript()
        self.names = Names()
        # @path completion lists this machine's files: not a remote session's.
        self.screen = Screen(self, ShellCompleter(self.names, self.cwd if target.host is None else lambda: None), history)
        self.keeper = ConnectionKeeper(self, timeout)
        self.requests = OpenRequests(self)
        self.builtins = Builtins(self)
        #: The line to print once the shell is gone, and the exit status.
        self.farewell = ""
        self.status = 0
        #: The person left (the daemon is told why: Claude Code's SessionEnd hooks).
        self.left = False

    async def run(self) -> None:
        """Run until the person leaves (or the daemon refuses this shell)."""
        self.keeper.start()
        try:
            await self.screen.run(r.note(f"roost shell · session {self.view.session} · /help lists the commands, "
                                         "Ctrl-D detaches"))
            await self._leave()
        finally:
            await self.keeper.close()

    async def _leave(self) -> None:
        """The person left: the daemon is told so (``prompt_input_exit``), as Claude Code's
        SessionEnd hooks are when its prompt is left; a daemon that cannot be told is not
        waited for."""
        client = self.keeper.client
        if not self.left or client is None or client.closed:
            return
        try:
            await asyncio.wait_for(client.call("detach", detach_params(client, self.view.session, "prompt_input_exit")), 2)
        except (RpcError, ConnectionClosed, Timeout, asyncio.TimeoutError, OSError):
            pass  # the daemon keeps the session all the same

    def cwd(self) -> str:
        """The session's folder (``home`` until the daemon said)."""
        return self.view.cwd or self.home

    # -- events in ---------------------------------------------------------------------------

    def take(self, event: dict[str, Any]) -> None:
        """An event from the daemon (a notification on the connection)."""
        try:
            self._take(event)
        except Exception:
            # A rendering bug must not end the connection; show it and go on.
            self.screen.print(r.error(traceback.format_exc(limit=3)))

    def _take(self, event: dict[str, Any]) -> None:
        if event.get("session") != self.view.session:
            return
        if event.get("type") == "lagged":
            self.screen.print(self.transcript.feed(event))
            self.keeper.spawn(self.keeper.reattach())
            return
        if not self.view.apply(event):
            return
        self.screen.print(self.transcript.feed(event))
        self.requests.settle()
        self.screen.invalidate()

    # -- what the screen shows ---------------------------------------------------------------

    def live(self) -> r.Lines:
        """The live area: the unfinished reply, tools running, the open request."""
        now = time.time()
        width = self.screen.width
        lines = self.transcript.live()
        # A call waiting for approval is not running yet: its request shows instead.
        lines += [r.running_tool(call, now, width) for call in self.view.tools.values()
                  if call.call_id not in self.view.pending]
        request = self.requests.shown()
        if request is not None:
            count = len(self.view.pending)
            position = f"  (1 of {count})" if count > 1 else ""
            lines += r.request_panel(request, now, width, position=position, choosing=self.requests.choosing())
        return lines

    def toolbar(self) -> r.Fragments:
        """The bottom line."""
        return r.toolbar(self.view, time.time(), connected=self.keeper.connected, width=self.screen.width,
                         model=self.choices.model or "", agent=self.choices.agent or "",
                         mode=self.choices.mode or "")

    def prompt(self) -> r.Fragments:
        """What Enter will do."""
        return r.prompt(self.requests.input_mode(), self.view.run is not None)

    # -- what the keys do --------------------------------------------------------------------

    def approval_open(self) -> bool:
        """Whether keys answer an approval now."""
        return self.requests.approval_open()

    def approval_key(self, key: str) -> None:
        """A key that answers the open approval (``_approval_keys``)."""
        self.requests.approval_key(key)

    def can_go_back(self) -> bool:
        """Whether Escape goes back to the approval's keys."""
        return self.requests.can_go_back()

    def go_back(self) -> None:
        """Back to the approval's keys (from a denial's reason, or a scope's choice)."""
        self.requests.go_back()

    def submit(self, text: str) -> bool:
        """Enter: answer, run a command, dispatch or steer; False when ``text`` was not
        taken (an approval is open: nothing typed is sent as steering by accident)."""
        if self.requests.reply(text) or not text.strip():
            return True
        command = parse(text)
        if command is not None:
            if builtin(command[0], {name for name, _, _ in self.names.commands}) is None:
                self.keeper.spawn(self._run_custom(text.strip()))
                return True
            self.screen.print(r.note(f"› {text.strip()}"))
            self.keeper.spawn(self.builtins.run(*command))
            return True
        mode = self.requests.input_mode()
        if mode == "answer":
            self.requests.answer(text)
        elif mode == "approval":
            self.screen.print(r.note(f"(an approval is open: {keys.KEYS_HELP} at an empty prompt; "
                                     "what you typed stays in the input)", "class:warn"))
            return False
        else:
            self.keeper.spawn(self.send(text))
        return True

    def abort_if_running(self) -> bool:
        """Ctrl-C: abort the run in flight, if there is one."""
        if self.view.run is None:
            return False
        self.screen.print(r.note("(aborting the run; the session stays)"))
        self.keeper.spawn(self._abort())
        return True

    def detach(self) -> None:
        """Leave; the daemon keeps the session and its run."""
        session = self.view.session
        self.farewell = f"detached from session {session}; the daemon keeps it (roost attach {session})"
        self.left = True
        self.screen.exit()

    def toggle_reasoning(self) -> None:
        """Reasoning in full or collapsed; turning it on shows the latest in full."""
        transcript = self.transcript
        transcript.expand_reasoning = not transcript.expand_reasoning
        if transcript.expand_reasoning:
            self.screen.print(r.note("(reasoning: shown in full)") + r.reasoning(transcript.last_reasoning, True, self.screen.width))
        else:
            self.screen.print(r.note("(reasoning: collapsed)"))
        self.screen.invalidate()

    # -- the run: dispatch, steer, abort -----------------------------------------------------

    async def send(self, text: str, approved_lines: list[str] | None = None) -> None:
        """A task (dispatched as typed: the daemon expands ``/name`` and reads ``//`` as
        ``/``; ``approved_lines``: its command's lines a person approved), or steering for
        the run in flight (``//`` read as ``/`` here)."""
        client = await self.keeper.ready()
        session = self.view.session
        literal = text[1:] if text.startswith("//") else text
        if self.view.run is not None:
            try:
                await client.call("steer", session=session, text=literal)
                return
            except RpcError as exc:
                if exc.code != ErrorCode.NOT_RUNNING:
                    raise
        if await self.requests.ask_trust(client, text):
            return
        params: dict[str, Any] = {"task": text, "session": session, **env_param(self.target)}
        if approved_lines:
            params["approved_lines"] = approved_lines
        custom = text.startswith("/") and literal == text
        # Unless this shell chose otherwise, the session goes on as its last run went (a
        # custom command's own model comes before the last run's).
        for key in ("model", "mode", "agent"):
            value = getattr(self.choices, key) or (None if custom and key == "model" else getattr(self.view, key))
            if value:
                params[key] = value
        try:
            await client.call("dispatch", params)
        except RpcError as exc:
            # Someone started a run on this session a moment ago: this is steering now.
            if exc.code != ErrorCode.SESSION_BUSY or custom:
                raise
            await client.call("steer", session=session, text=literal)

    async def _run_custom(self, text: str) -> None:
        """A custom command: a run of its own, so not while one is in flight."""
        if self.view.run is not None:
            self.screen.print(r.note(f"(a run is in flight; {text.split()[0]} starts a run of its own: "
                                     "wait for this one, or abort it)", "class:error"))
            return
        try:
            await self.send(text)
        except RpcError as exc:
            lines = exc.data.get("lines") if isinstance(exc.data, dict) else None
            if exc.code == ErrorCode.APPROVAL_NEEDED and lines:
                self.requests.ask_lines(text, lines)
                return
            name = text.split()[0][1:]
            near = closest(name, [n for n, _, _ in self.names.commands])
            if exc.code != ErrorCode.INVALID_PARAMS or not near:
                raise
            # The daemon has no such command: perhaps a slip of a command's name.
            hint = " or ".join("/" + n for n in near)
            self.screen.print(r.note(f"{exc.message}; did you mean {hint}?", "class:error"))

    async def _abort(self) -> None:
        client = await self.keeper.ready()
        try:
            await client.call("abort", session=self.view.session)
        except RpcError as exc:
            if exc.code != ErrorCode.NOT_RUNNING:
                raise
