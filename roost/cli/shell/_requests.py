"""The open requests and their answers: an approval, a question, and the shell's own question
before it trusts a folder.

An approval is answered at an empty prompt with a key, as ``roost dispatch`` asks
(``_approval_keys``: y once, s or a for the session, then 1 or 2 where it offers two
scopes, n deny, and then the input is the denial's reason; Escape goes back to the
approval), or with ``/approve`` and ``/deny``; while one is open, what is typed is never
sent as steering. A question is answered with the input (a number picks one of its choices).
Before the first run in a folder whose files would widen what roost does, the shell shows
them and asks, once per folder; the task waits for the answer and is sent after it.

Methods the daemon may not have yet (``permission.respond``, ``human.respond``,
``trust.show``) are looked up in its ``hello`` catalogue; without one, the shell says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roost.protocol import ErrorCode, RpcError
from roost.protocol.asyncio_client import AsyncClient

from .. import _approval_keys as keys
from .._connect import env_param
from . import _display as r
from ._view import Request

if TYPE_CHECKING:
    from ._shell import Shell


class OpenRequests:
    """What this shell asks, and how the person answers what the session asks."""

    def __init__(self, shell: Shell) -> None:
        self._shell = shell
        #: The approval whose denial's reason the input is now.
        self._denying: str | None = None
        #: The approval whose scope for the session is being chosen.
        self._choosing: str | None = None
        #: Folders this shell asked about trusting (once each), and the question open now:
        #: trust.show's answer, and the task that waits for the answer.
        self._trust_asked: set[str] = set()
        self._trust_question: tuple[dict[str, Any], str] | None = None
        #: A custom command whose ``!`command``` lines wait for approval: what was typed,
        #: and the lines (see :meth:`ask_lines`).
        self._lines_question: tuple[str, list[str]] | None = None

    def input_mode(self) -> str:
        """What the input is now: "trust", "deny" (a reason), "answer", "approval" (keys
        answer; Enter sends nothing) or "normal"."""
        if self._trust_question is not None:
            return "trust"
        if self._lines_question is not None:
            return "lines"
        if self._denying is not None:
            return "deny"
        request = self._shell.view.first_request()
        if request is None:
            return "normal"
        return "answer" if request.kind == "question" else "approval"

    def shown(self) -> Request | None:
        """The request the live area shows: the one being denied, else the first open one."""
        view = self._shell.view
        if self._denying is not None and self._denying in view.pending:
            return view.pending[self._denying]
        return view.first_request()

    def choosing(self) -> bool:
        """Whether the shown approval's scope for the session is being chosen."""
        request = self.shown()
        return request is not None and request.call_id == self._choosing

    def settle(self) -> None:
        """Forget a denial or a choice whose request is no longer open (answered elsewhere,
        or its session is no longer the shell's)."""
        if self._denying is not None and self._denying not in self._shell.view.pending:
            self._denying = None
        if self._choosing is not None and self._choosing not in self._shell.view.pending:
            self._choosing = None

    # -- keys and input ----------------------------------------------------------------------

    def approval_open(self) -> bool:
        """Whether keys answer an approval now."""
        return self.input_mode() == "approval"

    def approval_key(self, key: str) -> None:
        """A key while an approval is open: what it means is ``_approval_keys``'s."""
        request = self._shell.view.first_request("permission")
        if request is None:
            return
        offered = request.as_map()
        if self._choosing == request.call_id:
            picked = keys.chosen(offered, key)
            if picked is not None:
                self._choosing = None
                self._shell.keeper.spawn(self.respond(request.call_id, keys.APPROVE, picked.scope))
            return
        given = keys.answer(offered, key)
        if given is None:
            if key.lower() in keys.KEYS:
                self._shell.screen.print(r.note("(nothing can be approved for the session: y approves once)"))
            return
        if given.decision == keys.DENY:
            self._denying = request.call_id
        elif given.decision == keys.CHOOSE:
            self._choosing = request.call_id
        else:
            self._shell.keeper.spawn(self.respond(request.call_id, keys.APPROVE, given.scope))
        self._shell.screen.invalidate()

    def can_go_back(self) -> bool:
        """Whether Escape goes back to the approval (from a denial's reason, or from the
        choice of a scope)."""
        return self._denying is not None or self.choosing()

    def go_back(self) -> None:
        """Back to the approval's keys."""
        self._denying = self._choosing = None
        self._shell.screen.invalidate()

    def reply(self, text: str) -> bool:
        """Enter with ``text`` while the trust question or a denial's reason is asked: send
        the answer (True); False when neither is asked."""
        spawn = self._shell.keeper.spawn
        if self._trust_question is not None:
            (shown, task), self._trust_question = self._trust_question, None
            spawn(self._trust_then_send(shown, task, text.strip().lower() in ("y", "yes")))
            return True
        if self._lines_question is not None:
            (typed, lines), self._lines_question = self._lines_question, None
            if text.strip().lower() in ("y", "yes"):
                spawn(self._shell.send(typed, approved_lines=lines))
            else:
                self._shell.screen.print(r.note("(not run: the command's lines were not approved)"))
            return True
        if self._denying is not None:
            call_id, self._denying = self._denying, None
            spawn(self.respond(call_id, "deny", "once", text.strip()))
            return True
        return False

    def answer(self, text: str) -> None:
        """Enter with ``text`` while a question is open: its answer (a number: that choice)."""
        request = self._shell.view.first_request("question")
        assert request is not None
        answer = text.strip()
        if answer.isdigit() and 1 <= int(answer) <= len(request.choices):
            answer = request.choices[int(answer) - 1]
        self._shell.keeper.spawn(self._answer(request.call_id, answer))

    # -- approvals and questions -------------------------------------------------------------

    async def approve(self, scope: str) -> None:
        """``/approve``: approve the open approval for ``scope``."""
        request = self._shell.view.first_request("permission")
        if request is None:
            self._shell.screen.print(r.note("(nothing waits for approval)"))
            return
        await self.respond(request.call_id, "approve", scope)

    async def deny(self, reason: str) -> None:
        """``/deny``: deny the open approval, for ``reason``."""
        request = self._shell.view.first_request("permission")
        if request is None:
            self._shell.screen.print(r.note("(nothing waits for approval)"))
            return
        self._denying = None
        await self.respond(request.call_id, "deny", "once", reason)

    async def respond(self, call_id: str, decision: str, scope: str, reason: str = "") -> None:
        """Answer the approval of ``call_id`` (``permission.respond``)."""
        shell = self._shell
        client = await shell.keeper.ready()
        if not client.has("permission.respond"):
            shell.screen.print(r.note("this daemon cannot take approvals (no permission.respond method)",
                                      "class:error"))
            return
        params = {"session": shell.view.session, "call_id": call_id, "decision": decision, "scope": scope}
        if reason:
            params["reason"] = reason
        try:
            await client.call("permission.respond", params)
        except RpcError as exc:
            if exc.code != ErrorCode.NOT_PENDING:
                raise
            shell.screen.print(r.note("(already answered)"))

    async def _answer(self, call_id: str, answer: str) -> None:
        shell = self._shell
        client = await shell.keeper.ready()
        if not client.has("human.respond"):
            shell.screen.print(r.note("this daemon cannot take answers (no human.respond method)", "class:error"))
            return
        try:
            await client.call("human.respond", session=shell.view.session, call_id=call_id, answer=answer)
        except RpcError as exc:
            if exc.code != ErrorCode.NOT_PENDING:
                raise
            shell.screen.print(r.note("(already answered)"))

    # -- trusting a folder -------------------------------------------------------------------

    def ask_lines(self, typed: str, lines: list[str]) -> None:
        """A custom command's ``!`command``` lines that need approval: show them and ask
        (Enter with y dispatches ``typed`` again, those lines approved)."""
        self._lines_question = (typed, lines)
        self._shell.screen.print(r.lines_question(lines))
        self._shell.screen.invalidate()

    async def ask_trust(self, client: AsyncClient, task: str) -> bool:
        """Before the first run in a folder whose files would widen what roost does, show
        them and ask (once per folder); True when ``task`` now waits for the answer."""
        shell = self._shell
        cwd = shell.cwd()
        if cwd in self._trust_asked or not client.has("trust.show"):
            return False
        self._trust_asked.add(cwd)
        shown = await client.call("trust.show", cwd=cwd, **env_param(shell.target))
        if shown.get("current", True):
            return False
        self._trust_question = (shown, task)
        shell.screen.print(r.trust_question(shown))
        shell.screen.invalidate()
        return True

    async def _trust_then_send(self, shown: dict[str, Any], task: str, trust: bool) -> None:
        shell = self._shell
        if trust:
            client = await shell.keeper.ready()
            done = await client.call("trust.add", cwd=shell.cwd(), files=shown["files"], **env_param(shell.target))
            shell.screen.print(r.note(f"(trusted {done['folder']})"))
        else:
            shell.screen.print(r.note(f"(not trusted: what they widen is ignored; roost trust {shown['folder']} later)"))
        await shell.send(task)
