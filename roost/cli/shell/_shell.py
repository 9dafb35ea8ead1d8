"""The shell: one session's events in, what the person types out, and staying connected.

Events arrive on the connection, are folded into the :class:`SessionView` (status, open
requests, figures) and the :class:`Transcript` (lines to commit), and the screen is told.
What is typed is a task (``dispatch``), or steering while a run is in flight (``steer``), a
slash command (built in, or a custom one: ``/name args`` goes to ``dispatch`` as it is typed,
and the daemon expands it), or the answer to an open approval or question.

Staying connected: when the connection ends (the daemon stopped or restarted) the shell
keeps trying to connect, and re-attaches from the last ``seq`` it saw, so the daemon
replays exactly what it missed. It starts a daemon only when the person asks for something
while none is there (as every roost command does). A ``lagged`` notice (this terminal fell
behind) is handled the same way, on the same connection.

Methods the daemon may not have yet (approvals, questions, agents, reports, prompts,
compaction) are looked up in its ``hello`` catalogue; without one, the shell says so.
"""

from __future__ import annotations

import asyncio
import os
import time
import traceback
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from roost.protocol import DEFAULT_TIMEOUT, MODES, ConnectionClosed, ErrorCode, RoostError, RpcError, Timeout

from .._connect import EXIT_REFUSED, START_TIMEOUT, DaemonError, start_daemon
from . import _display as r
from ._app import Screen
from ._complete import Names, ShellCompleter
from roost.protocol.asyncio_client import AsyncClient
from ._slash import COMMANDS, SCOPES, builtin, find, parse
from ._transcript import Transcript
from ._view import Request, SessionView

#: The name this shell gives in ``hello``: answers to approvals are attributed to it.
CLIENT_NAME = "shell"
#: Seconds between two looks at how many clients are attached.
CLIENTS_EVERY = 2.0
#: Seconds between redraws while something moves (spinner, elapsed time).
TICK = 0.1


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

    def __init__(self, *, socket: str, session: str, cwd: str, choices: Choices,
                 history: str | None, timeout: float | None = DEFAULT_TIMEOUT) -> None:
        self.socket = socket
        self.timeout = timeout
        self.choices = choices
        self.view = SessionView(session, cwd)
        self.transcript = Transcript()
        self.names = Names()
        self.client: AsyncClient | None = None
        self.screen = Screen(self, ShellCompleter(self.names, self._cwd), history)
        self._connected = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._denying: str | None = None
        #: Folders this shell asked about trusting (once each), and the question open now:
        #: trust.show's answer, and the task that waits for the answer.
        self._trust_asked: set[str] = set()
        self._trust_question: tuple[dict[str, Any], str] | None = None
        self._next_clients = 0.0
        #: The line to print once the shell is gone, and the exit status.
        self.farewell = ""
        self.status = 0

    async def run(self) -> None:
        """Run until the person leaves (or the daemon refuses this shell)."""
        keeper = asyncio.create_task(self._stay_connected())
        keeper.add_done_callback(self._keeper_done)
        ticker = asyncio.create_task(self._tick())
        try:
            await self.screen.run(r.note(f"roost shell · session {self.view.session} · /help lists the commands, "
                                         "Ctrl-D detaches"))
        finally:
            for task in (keeper, ticker, *self._tasks):
                task.cancel()
            await asyncio.gather(keeper, ticker, *self._tasks, return_exceptions=True)
            if self.client is not None:
                await self.client.aclose()

    # -- the connection ------------------------------------------------------------------------

    async def _stay_connected(self) -> None:
        """Connect, attach from the last seq seen, wait for the end; again, until cancelled.

        Raises:
            RpcError: the daemon refused the handshake or the attach (the shell ends).
        """
        delay = 0.05
        attached_before = False
        while True:
            try:
                client = await AsyncClient.open(self.socket, client=CLIENT_NAME, on_notification=self._on_notification,
                                                timeout=self.timeout)
            except (OSError, ConnectionClosed, Timeout):
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            delay = 0.05
            self.client = client
            try:
                since = self.view.last_seq
                await client.call("attach", session=self.view.session, since=since)
                # The history is on screen before the toolbar says the shell is attached.
                self.screen.flush()
                if attached_before:
                    self.screen.print(r.note(f"(back: re-attached from seq {since})"))
                attached_before = True
                self._connected.set()
                self.screen.invalidate()
                self._spawn(self._learn_names(client))
                await client.wait_closed()
            except (ConnectionClosed, Timeout):
                pass
            finally:
                self._connected.clear()
                self.client = None
                await client.aclose()
            self.screen.print(self.transcript.finish()
                              + r.note(f"(lost the daemon at seq {self.view.last_seq}; reconnecting)", "class:warn.bold"))
            self.screen.invalidate()

    def _keeper_done(self, task: asyncio.Task[None]) -> None:
        # The connection keeper only ends on its own when the daemon refuses this shell
        # (or on a bug): with nothing to show, the shell ends too, saying why.
        if task.cancelled() or task.exception() is None:
            return
        error = task.exception()
        if isinstance(error, RpcError):
            message = f"{error.message} [{error.name}]"
        else:
            message = str(error) if isinstance(error, RoostError) else repr(error)
        self.farewell = f"roost: the shell cannot go on with session {self.view.session}: {message}"
        self.status = EXIT_REFUSED
        self.screen.exit()

    def _on_notification(self, event: dict[str, Any]) -> None:
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
            self._spawn(self._reattach())
            return
        if not self.view.apply(event):
            return
        self.screen.print(self.transcript.feed(event))
        if self._denying is not None and self._denying not in self.view.pending:
            self._denying = None
        self.screen.invalidate()

    async def _reattach(self) -> None:
        client = await self._ready()
        await client.call("attach", session=self.view.session, since=self.view.last_seq)

    async def _ready(self) -> AsyncClient:
        """The connection, waiting for it (and starting a daemon) if there is none now."""
        client = self.client
        if client is not None and self._connected.is_set():
            return client
        try:
            await asyncio.wait_for(self._connected.wait(), 1.0)
        except asyncio.TimeoutError:
            self.screen.print(r.note("(no daemon: starting one)"))
            try:
                await asyncio.to_thread(start_daemon, self.socket)
            except DaemonError as exc:
                raise ConnectionClosed(exc.message) from None
            await asyncio.wait_for(self._connected.wait(), START_TIMEOUT)
        assert self.client is not None
        return self.client

    async def _learn_names(self, client: AsyncClient) -> None:
        """What completion offers: models, agents, sessions, custom commands."""
        providers = await client.call("providers.list", cwd=self._cwd(), env=dict(os.environ))
        models = [providers.get("default_model") or "", "scripted/demo"]
        for provider in providers.get("providers", []):
            models += [f"{provider['name']}/{alias}" for alias in provider.get("models") or {}]
        self.names.models[:] = sorted({m for m in models if m})
        if client.has("agents.list"):
            agents = (await client.call("agents.list", cwd=self._cwd())).get("agents", [])
            self.names.agents[:] = [a["name"] if isinstance(a, dict) else str(a) for a in agents]
        await self._refresh_commands(client)
        await self._refresh_sessions(client)

    async def _refresh_commands(self, client: AsyncClient) -> None:
        if not client.has("commands.list"):
            return
        listed = await client.call("commands.list", cwd=self._cwd(), env=dict(os.environ))
        self.names.commands[:] = [
            (c.get("short") or c["name"], c.get("argument_hint") or "", c.get("description") or "")
            for c in listed.get("commands", [])
        ]

    async def _refresh_sessions(self, client: AsyncClient) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = (await client.call("sessions.list"))["sessions"]
        self.names.sessions[:] = [(row["id"], f"{row.get('status', '')} · {row.get('cwd', '')}") for row in reversed(rows)]
        for row in rows:
            if row["id"] == self.view.session and row.get("clients") != self.view.clients:
                self.view.clients = row.get("clients")
                self.screen.invalidate()
        return rows

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK)
            self.transcript.width = self.screen.width
            view = self.view
            if view.run is not None or view.pending or not self._connected.is_set():
                self.screen.invalidate()
            if self.client is not None and self._connected.is_set() and time.monotonic() > self._next_clients:
                self._next_clients = time.monotonic() + CLIENTS_EVERY
                self._spawn(self._refresh_sessions(self.client), quiet=True)

    def _spawn(self, work: Awaitable[Any], *, quiet: bool = False) -> None:
        async def guarded() -> None:
            try:
                await work
            except RpcError as exc:
                if not quiet:
                    self.screen.print(r.error(f"{exc.message.strip()} [{exc.name}]"))
            except ConnectionClosed:
                if not quiet:
                    self.screen.print(r.note("(not done: no connection to the daemon)", "class:warn.bold"))
            except Timeout as exc:
                if not quiet:
                    self.screen.print(r.note(f"(not done: {exc}; reconnecting)", "class:warn.bold"))
            except asyncio.TimeoutError:
                if not quiet:
                    self.screen.print(r.note("(not done: the daemon did not come back in time)", "class:warn.bold"))

        task = asyncio.create_task(guarded())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _cwd(self) -> str:
        return self.view.cwd or os.getcwd()

    # -- what the screen shows ---------------------------------------------------------------

    def live(self) -> r.Lines:
        """The live area: the unfinished reply, tools running, the open request."""
        now = time.time()
        width = self.screen.width
        lines = self.transcript.live()
        # A call waiting for approval is not running yet: its request shows instead.
        lines += [r.running_tool(call, now, width) for call in self.view.tools.values()
                  if call.call_id not in self.view.pending]
        request = self._request()
        if request is not None:
            count = len(self.view.pending)
            position = f"  (1 of {count})" if count > 1 else ""
            lines += r.request_panel(request, now, width, position=position)
        return lines

    def toolbar(self) -> r.Fragments:
        """The bottom line."""
        return r.toolbar(self.view, time.time(), connected=self._connected.is_set(), width=self.screen.width,
                         model=self.choices.model or "", agent=self.choices.agent or "",
                         mode=self.choices.mode or "")

    def prompt(self) -> r.Fragments:
        """What Enter will do."""
        return r.prompt(self._input_mode(), self.view.run is not None)

    def _request(self) -> Request | None:
        if self._denying is not None and self._denying in self.view.pending:
            return self.view.pending[self._denying]
        return self.view.first_request()

    def _input_mode(self) -> str:
        if self._trust_question is not None:
            return "trust"
        if self._denying is not None:
            return "deny"
        request = self.view.first_request()
        return "answer" if request is not None and request.kind == "question" else "normal"

    # -- what the keys do --------------------------------------------------------------------

    def approval_open(self) -> bool:
        """Whether y / a / n answer an approval now."""
        request = self.view.first_request()
        return self._denying is None and request is not None and request.kind == "permission"

    def approval_key(self, key: str) -> None:
        """y: approve once; a: approve for the session; n: deny (a reason is asked for)."""
        request = self.view.first_request("permission")
        if request is None:
            return
        if key == "n":
            self._denying = request.call_id
            self.screen.invalidate()
            return
        self._spawn(self._respond(request.call_id, "approve", "session" if key == "a" else "once"))

    def asking_reason(self) -> bool:
        """Whether the input is the reason of a denial."""
        return self._denying is not None

    def cancel_reason(self) -> None:
        """Back from the denial's reason to the approval prompt."""
        self._denying = None
        self.screen.invalidate()

    def submit(self, text: str) -> None:
        """Enter: answer, run a command, dispatch or steer."""
        mode = self._input_mode()
        if mode == "trust":
            assert self._trust_question is not None
            (shown, task), self._trust_question = self._trust_question, None
            self._spawn(self._trust_then_send(shown, task, text.strip().lower() in ("y", "yes")))
            return
        if mode == "deny":
            call_id, self._denying = self._denying, None
            assert call_id is not None
            self._spawn(self._respond(call_id, "deny", "once", text.strip()))
            return
        if not text.strip():
            return
        command = parse(text)
        if command is not None:
            if builtin(command[0], {name for name, _, _ in self.names.commands}) is None:
                self._spawn(self._run_custom(text.strip()))
                return
            self.screen.print(r.note(f"› {text.strip()}"))
            self._spawn(self._command(*command))
            return
        if mode == "answer":
            request = self.view.first_request("question")
            assert request is not None
            answer = text.strip()
            if answer.isdigit() and 1 <= int(answer) <= len(request.choices):
                answer = request.choices[int(answer) - 1]
            self._spawn(self._answer(request.call_id, answer))
            return
        self._spawn(self._send(text))

    def abort_if_running(self) -> bool:
        """Ctrl-C: abort the run in flight, if there is one."""
        if self.view.run is None:
            return False
        self.screen.print(r.note("(aborting the run; the session stays)"))
        self._spawn(self._abort())
        return True

    def detach(self) -> None:
        """Leave; the daemon keeps the session and its run."""
        session = self.view.session
        self.farewell = f"detached from session {session}; the daemon keeps it (roost attach {session})"
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

    # -- requests to the daemon --------------------------------------------------------------

    async def _send(self, text: str) -> None:
        """A task (dispatched as typed: the daemon expands ``/name`` and reads ``//`` as
        ``/``), or steering for the run in flight (``//`` read as ``/`` here)."""
        client = await self._ready()
        session = self.view.session
        literal = text[1:] if text.startswith("//") else text
        if self.view.run is not None:
            try:
                await client.call("steer", session=session, text=literal)
                return
            except RpcError as exc:
                if exc.code != ErrorCode.NOT_RUNNING:
                    raise
        if await self._ask_trust(client, text):
            return
        params: dict[str, Any] = {"task": text, "session": session, "env": dict(os.environ)}
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
        await self._send(text)

    async def _abort(self) -> None:
        client = await self._ready()
        try:
            await client.call("abort", session=self.view.session)
        except RpcError as exc:
            if exc.code != ErrorCode.NOT_RUNNING:
                raise

    async def _respond(self, call_id: str, decision: str, scope: str, reason: str = "") -> None:
        client = await self._ready()
        if not client.has("permission.respond"):
            self.screen.print(r.note("this daemon cannot take approvals (no permission.respond method)", "class:error"))
            return
        params = {"session": self.view.session, "call_id": call_id, "decision": decision, "scope": scope}
        if reason:
            params["reason"] = reason
        try:
            await client.call("permission.respond", params)
        except RpcError as exc:
            if exc.code != ErrorCode.NOT_PENDING:
                raise
            self.screen.print(r.note("(already answered)"))

    async def _answer(self, call_id: str, answer: str) -> None:
        client = await self._ready()
        if not client.has("human.respond"):
            self.screen.print(r.note("this daemon cannot take answers (no human.respond method)", "class:error"))
            return
        try:
            await client.call("human.respond", session=self.view.session, call_id=call_id, answer=answer)
        except RpcError as exc:
            if exc.code != ErrorCode.NOT_PENDING:
                raise
            self.screen.print(r.note("(already answered)"))

    # -- slash commands ----------------------------------------------------------------------

    async def _command(self, name: str, arg: str) -> None:
        matches = find(name)
        if len(matches) != 1:
            known = ", ".join("/" + c.name for c in matches) if matches else "/help lists them"
            self.screen.print(r.note(f"unknown command /{name}: {known}", "class:error"))
            return
        await getattr(self, "_cmd_" + matches[0].name)(arg)

    async def _cmd_help(self, arg: str) -> None:
        # The folder's commands as they are now (files may have changed since connecting).
        await self._refresh_commands(await self._ready())
        builtins = [(c.name, c.args, c.doc) for c in COMMANDS]
        self.screen.print(r.help_lines(builtins, self.names.commands))

    async def _cmd_agent(self, arg: str) -> None:
        if not arg:
            self.screen.print(r.note(f"agent: {self.choices.agent or self.view.agent or 'default'}; "
                                     f"known: {', '.join(self.names.agents)}"))
            return
        client = await self._ready()
        if client.has("agents.list") and arg not in self.names.agents:
            self.screen.print(r.note(f"no agent {arg!r}; known: {', '.join(self.names.agents)}", "class:error"))
            return
        self.choices.agent = arg
        self.screen.print(r.note(f"(the next tasks run with agent {arg})"))

    async def _cmd_mode(self, arg: str) -> None:
        if arg not in MODES:
            self.screen.print(r.note(f"mode is one of {', '.join(MODES)}", "class:error"))
            return
        self.choices.mode = arg
        self.screen.print(r.note(f"(the next tasks run in mode {arg})"))

    async def _cmd_model(self, arg: str) -> None:
        if not arg:
            self.screen.print(r.note(f"model: {self.choices.model or self.view.model or 'the default'}"))
            return
        self.choices.model = arg
        self.screen.print(r.note(f"(the next tasks use model {arg})"))

    async def _cmd_sessions(self, arg: str) -> None:
        rows = await self._refresh_sessions(await self._ready())
        self.screen.print(r.sessions_table(rows, self.view.session))

    async def _cmd_switch(self, arg: str) -> None:
        rows = await self._refresh_sessions(await self._ready())
        ids = [row["id"] for row in rows]
        matches = [i for i in ids if i == arg] or [i for i in ids if arg and i.startswith(arg)]
        if len(matches) != 1:
            self.screen.print(r.note(f"{len(matches) or 'no'} sessions match {arg!r} (/sessions lists them)", "class:error"))
            return
        (row,) = [row for row in rows if row["id"] == matches[0]]
        await self._switch(row["id"], row.get("cwd", ""))

    async def _cmd_new(self, arg: str) -> None:
        client = await self._ready()
        created = await client.call("sessions.create", cwd=os.getcwd())
        await self._switch(created["session"], os.getcwd())

    async def _cmd_rewind(self, arg: str) -> None:
        # A fork of this session at the end of the task before the last N: the session
        # itself stays as it is (/switch goes back to it), and a run in flight goes on there.
        if arg and not (arg.isdigit() and int(arg) > 0):
            self.screen.print(r.note("/rewind takes how many tasks to go back: /rewind 2", "class:error"))
            return
        n = int(arg or 1)
        tasks = self.view.task_seqs
        if len(tasks) < n:
            self.screen.print(r.note(f"(this session has {len(tasks)} tasks)", "class:error"))
            return
        client = await self._ready()
        if not client.has("sessions.fork"):
            self.screen.print(r.note("this daemon has no sessions.fork method yet (a newer roost will)"))
            return
        old = self.view.session
        fork = await client.call("sessions.fork", session=old, at=tasks[-n] - 1)
        await self._switch(fork["session"], self.view.cwd)
        self.screen.print(r.note(f"(rewound {n} task{'s' if n > 1 else ''}: this is {fork['session']}, a fork of "
                                 f"{old} at seq {fork['forked_at']}; /switch {old} goes back)"))

    async def _switch(self, session: str, cwd: str) -> None:
        client = await self._ready()
        if session == self.view.session:
            self.screen.print(r.note("(already here)"))
            return
        old = self.view.session
        self.screen.print(self.transcript.finish())
        # The new view is in place before the attach is sent, so every event of the new
        # session finds it; the old session's stragglers no longer match and are dropped.
        self.view = SessionView(session, cwd)
        self.transcript = Transcript(width=self.screen.width, expand_reasoning=self.transcript.expand_reasoning)
        self._denying = None
        await client.call("detach", session=old)
        await client.call("attach", session=session, since=0)
        await self._refresh_commands(client)
        await self._refresh_sessions(client)

    async def _cmd_abort(self, arg: str) -> None:
        if not self.abort_if_running():
            self.screen.print(r.note("(no run in flight)"))

    async def _cmd_approve(self, arg: str) -> None:
        scope = arg or "once"
        if scope not in SCOPES:
            self.screen.print(r.note(f"approve {' or '.join(SCOPES)}", "class:error"))
            return
        request = self.view.first_request("permission")
        if request is None:
            self.screen.print(r.note("(nothing waits for approval)"))
            return
        await self._respond(request.call_id, "approve", scope)

    async def _ask_trust(self, client: AsyncClient, task: str) -> bool:
        """Before the first run in a folder whose files would widen what roost does, show
        them and ask (once per folder); True when the task now waits for the answer."""
        cwd = self._cwd()
        if cwd in self._trust_asked or not client.has("trust.show"):
            return False
        self._trust_asked.add(cwd)
        shown = await client.call("trust.show", cwd=cwd, env=dict(os.environ))
        if shown.get("current", True):
            return False
        self._trust_question = (shown, task)
        self.screen.print(r.trust_question(shown))
        self.screen.invalidate()
        return True

    async def _trust_then_send(self, shown: dict[str, Any], task: str, trust: bool) -> None:
        if trust:
            client = await self._ready()
            done = await client.call("trust.add", cwd=self._cwd(), files=shown["files"], env=dict(os.environ))
            self.screen.print(r.note(f"(trusted {done['folder']})"))
        else:
            self.screen.print(r.note(f"(not trusted: what they widen is ignored; roost trust {shown['folder']} later)"))
        await self._send(task)

    async def _cmd_deny(self, arg: str) -> None:
        request = self.view.first_request("permission")
        if request is None:
            self.screen.print(r.note("(nothing waits for approval)"))
            return
        self._denying = None
        await self._respond(request.call_id, "deny", "once", arg)

    async def _cmd_compact(self, arg: str) -> None:
        await self._optional("compact", {"session": self.view.session, "env": dict(os.environ)})

    async def _cmd_prompt(self, arg: str) -> None:
        params = {"session": self.view.session}
        # What the next run from this shell would get.
        for key in ("agent", "mode"):
            value = getattr(self.choices, key)
            if value:
                params[key] = value
        await self._optional("prompt", params, r.prompt_layers)

    async def _cmd_report(self, arg: str) -> None:
        client = await self._ready()
        stats = self.view.run or self.view.last_run
        if client.has("report"):
            params = {"session": self.view.session, **({"run": stats.run} if stats else {})}
            self.screen.print(r.mapping(await client.call("report", params)))
        elif stats is not None:
            self.screen.print(r.report(stats, time.time()))
        else:
            self.screen.print(r.note("(no run in this session yet)"))

    async def _cmd_detach(self, arg: str) -> None:
        self.detach()

    async def _optional(self, method: str, params: dict[str, Any],
                        show: Callable[[dict[str, Any]], r.Lines] = r.mapping) -> None:
        client = await self._ready()
        if not client.has(method):
            self.screen.print(r.note(f"this daemon has no {method} method yet (a newer roost will)"))
            return
        result = await client.call(method, params)
        self.screen.print(show(result) if isinstance(result, dict) else r.note(str(result)))
