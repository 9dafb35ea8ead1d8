"""The open requests and their answers: an approval, a question, and the shell's own question
before it trusts a folder.

An approval is answered at an empty prompt with a key (y: once, a: for the session, n: deny,
and then the input is the denial's reason; Escape goes back to the approval), or with
``/approve`` and ``/deny``; a question with the input (a number picks one of its choices).
Before the first run in a folder whose files would widen what roost does, the shell shows
them and asks, once per folder; the task waits for the answer and is sent after it.

Methods the daemon may not have yet (``permission.respond``, ``human.respond``,
``trust.show``) are looked up in its ``hello`` catalogue; without one, the shell says so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from roost.protocol import ErrorCode, RpcError
from roost.protocol.asyncio_client import AsyncClient

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
        #: Folders this shell asked about trusting (once each), and the question open now:
        #: trust.show's answer, and the task that waits for the answer.
        self._trust_asked: set[str] = set()
        self._trust_question: tuple[dict[str, Any], str] | None = None

    def input_mode(self) -> str:
        """What the input is now: "trust", "deny" (a reason), "answer" or "normal"."""
        if self._trust_question is not None:
            return "trust"
        if self._denying is not None:
            return "deny"
        request = self._shell.view.first_request()
        return "answer" if request is not None and request.kind == "question" else "normal"

    def shown(self) -> Request | None:
        """The request the live area shows: the one being denied, else the first open one."""
        view = self._shell.view
        if self._denying is not None and self._denying in view.pending:
            return view.pending[self._denying]
        return view.first_request()

    def settle(self) -> None:
        """Forget a denial whose request is no longer open (answered elsewhere, or its session
        is no longer the shell's)."""
        if self._denying is not None and self._denying not in self._shell.view.pending:
            self._denying = None

    # -- keys and input ----------------------------------------------------------------------

    def approval_open(self) -> bool:
        """Whether y / a / n answer an approval now."""
        request = self._shell.view.first_request()
        return self._denying is None and request is not None and request.kind == "permission"

    def approval_key(self, key: str) -> None:
        """y: approve once; a: approve for the session; n: deny (a reason is asked for)."""
        request = self._shell.view.first_request("permission")
        if request is None:
            return
        if key == "n":
            self._denying = request.call_id
            self._shell.screen.invalidate()
            return
        self._shell.keeper.spawn(self.respond(request.call_id, "approve", "session" if key == "a" else "once"))

    def asking_reason(self) -> bool:
        """Whether the input is the reason of a denial."""
        return self._denying is not None

    def cancel_reason(self) -> None:
        """Back from the denial's reason to the approval prompt."""
        self._denying = None
        self._shell.screen.invalidate()

    def reply(self, text: str) -> bool:
        """Enter with ``text`` while the trust question or a denial's reason is asked: send
        the answer (True); False when neither is asked."""
        spawn = self._shell.keeper.spawn
        if self._trust_question is not None:
            (shown, task), self._trust_question = self._trust_question, None
            spawn(self._trust_then_send(shown, task, text.strip().lower() in ("y", "yes")))
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
