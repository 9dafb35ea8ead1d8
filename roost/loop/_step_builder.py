"""What every rule of the loop writes with: a :class:`Builder` collects one step's events
(applying each to the state as it goes) and effects, and holds the moves the rules share:
starting the next model call (and, before it, a compaction when the window fills), answering
the calls still pending, a call's ``tool.started`` and ``tool.finished``, ending the run.

Calls that change things (not read-only, not sub-agents nor questions) run one at a time, in
the order the model gave them: :func:`release_head` starts the first pending one once it is
cleared. An input that breaks a rule raises :class:`InvalidInput` (``Builder.require``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from . import _events as ev
from ._context import cut_point, estimate, visible
from ._effects import CallModel, CancelRun, Effect, FinishRun, RunTool, Summarize
from ._events import Event, safe_text
from ._guardrails import warned
from ._inputs import Input
from ._permissions import ASK_HUMAN
from ._state import Phase, RunState, SessionState, apply, cost
from ._waits import PermissionWait


class InvalidInput(Exception):
    """An input that the session's phase does not allow. The state is unchanged."""

    def __init__(self, input: Input, phase: Phase, why: str) -> None:
        super().__init__(f"{type(input).__name__} in phase {phase.value}: {why}")
        self.input = input
        self.phase = phase


def changes(run: RunState, name: str) -> bool:
    """Whether a call of ``name`` may change files or state: such calls run one at a time,
    in the order the model gave them (sub-agents and questions are not tool runs)."""
    return name not in run.settings.read_only and name not in run.settings.subagents and name != ASK_HUMAN


def _head(run: RunState) -> str | None:
    """The first pending call that changes things: the only one of them that may run."""
    return next((c for c in run.pending if changes(run, run.tool_names.get(c, ""))), None)


def running_head(run: RunState | None) -> str | None:
    """The call that changes things running now (the head, once it is cleared)."""
    if run is None or run.phase is not Phase.TOOLS:
        return None
    head = _head(run)
    return head if head in run.cleared else None


def release_head(b: Builder, running: str | None) -> None:
    """Start the head call when it is cleared and was not running before this step."""
    run = b.state.run
    head = running_head(run)
    if head is not None and head != running:
        assert run is not None
        call = run.cleared[head]
        b.effects.append(RunTool(run.id, head, call["name"], call["input"], bool(call["outside"])))


class Builder:
    """Collects events (applying each as it goes) and effects for one step."""

    def __init__(self, state: SessionState, input: Input) -> None:
        self.state = state
        self.input = input
        self.events: list[Event] = []
        self.effects: list[Effect] = []

    # Positional-only, so that no field of an event's data can be taken for an argument.
    def emit(self, type: str, /, **data: Any) -> None:
        """An event of the run under way, if any."""
        run = self.state.run.id if self.state.run is not None else None
        self._append(Event(type, self.state.id, run, self.input.ts, safe_text(data)))

    def emit_run_started(self, run: str, /, **data: Any) -> None:
        """The event that starts run ``run`` (the state has no run under way yet)."""
        self._append(Event(ev.RUN_STARTED, self.state.id, run, self.input.ts, safe_text(data)))

    def _append(self, event: Event) -> None:
        self.events.append(event)
        self.state = apply(self.state, event)

    def emit_run_finished(self, reason: str, error: str | None = None, text: str | None = None) -> None:
        run = self.run
        data: dict[str, Any] = {
            "reason": reason,
            "text": run.text if text is None else text,
            "turns": run.turns,
            "usage": dict(run.usage),
            "duration": max(0.0, self.input.ts - run.started),
        }
        if run.settings.price is not None:
            data["cost"] = cost(run.usage, run.settings.price)
        if error is not None:
            data["error"] = error
        self.emit(ev.RUN_FINISHED, **data)
        self.effects.append(FinishRun(run.id, reason))

    def start_model_call(self, *, compact: bool = True) -> None:
        if self.run.stopping is not None:
            # Asked to stop after the step: this is where the run would have gone on.
            self.emit_run_finished("aborted", self.run.stopping)
            return
        for text, parts in zip(self.run.steering, self.run.steering_parts):
            self.emit(ev.MESSAGE_USER, text=text, origin="steer", **({"parts": [dict(p) for p in parts]} if parts else {}))
        if compact and self.start_compaction():
            return
        self.emit(ev.STEP_STARTED, step=self.run.turns + 1)
        run, state = self.run, self.state
        messages = visible(state.messages, state.compacted_upto)
        self.effects.append(CallModel(run.id, run.turns, run.settings.model, messages, run.settings.tools, state.summary))

    def start_compaction(self, force: bool = False, instructions: str = "") -> bool:
        """Summarize the older history first when the next call would fill too much of the
        window (or ``force``, with the person's ``instructions``), and there is a cut that
        keeps the recent replies whole."""
        run, state = self.run, self.state
        start = state.compacted_upto
        if not force:
            if run.settings.context_window is None or run.compact_skipped:
                return False
            tokens = estimate(state.messages, state.anchor_tokens, state.anchor_at, start)
            if tokens <= run.settings.compact_at * run.settings.context_window:
                return False
        else:
            tokens = estimate(state.messages, state.anchor_tokens, state.anchor_at, start)
        cut = cut_point(state.messages, start, run.settings.keep_turns)
        if cut is None:
            return False
        self.emit(ev.COMPACTION_STARTED, upto=cut, estimate=tokens, window=run.settings.context_window)
        older = visible(state.messages[:cut], start)
        self.effects.append(Summarize(run.id, run.settings.model, older, state.summary, instructions))
        return True

    def answer_pending(self, result: str, keep_waiting: bool = False, keep: tuple[str, ...] = ()) -> None:
        """Answer the step's unfinished calls with the error ``result``, but those in ``keep``.

        Open requests are closed first (every request gets exactly one resolution), unless
        ``keep_waiting``: then calls waiting for a person stay open.
        """
        run = self.run
        for call_id, wait in run.waiting.items():
            if keep_waiting:
                continue
            if isinstance(wait, PermissionWait):
                self.emit(
                    ev.PERMISSION_RESOLVED,
                    call_id=call_id,
                    tool=wait.name,
                    decision="deny",
                    scope="once",
                    reason=result,
                    client="roost",
                )
            else:
                self.emit(ev.HUMAN_ANSWERED, call_id=call_id, answer="", client="roost", cancelled=True)
        for call_id in self.run.pending:
            if (keep_waiting and call_id in run.waiting) or call_id in keep:
                continue
            began = self.run.tool_started.get(call_id)
            self.finish_call(call_id, result, is_error=True, latency=max(0.0, self.input.ts - began) if began else 0.0)

    def start_tool(self, call_id: str, name: str, input: Mapping[str, Any], cleared: bool, outside: bool) -> None:
        """``tool.started``: the call runs, or (one that changes things) waits its turn;
        ``cleared``: the policy or a person let it, recorded so that a call waiting its turn
        is known after a restart too."""
        flags = {"cleared": True, **({"outside": True} if outside else {})} if cleared else {}
        self.emit(ev.TOOL_STARTED, call_id=call_id, name=name, input=dict(input), **flags)

    def finish_call(
        self,
        call_id: str,
        result: str,
        *,
        is_error: bool,
        latency: float = 0.0,
        meta: Mapping[str, Any] | None = None,
        parts: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        self.emit(
            ev.TOOL_FINISHED,
            call_id=call_id,
            name=self.run.tool_names.get(call_id, ""),
            result=result,
            is_error=is_error,
            latency=latency,
            size=len(result),
            **({"meta": dict(meta)} if meta else {}),
            **({"parts": [dict(p) for p in parts]} if parts else {}),
        )

    def stop(self, reason: str, why: str, note: str) -> None:
        """End the run now: unfinished calls get ``note``, its processes are stopped."""
        self.answer_pending(note)
        self.effects.append(CancelRun(self.run.id))
        self.emit_run_finished(reason, why, text=why if reason in ("guardrail", "stuck") else None)

    @property
    def run(self) -> RunState:
        assert self.state.run is not None
        return self.state.run

    def require(self, ok: bool, why: str) -> None:
        if not ok:
            raise InvalidInput(self.input, self.state.phase, why)


def warn(b: Builder, on: str, texts: list[str], **where: Any) -> None:
    """Say which guardrails that only warn match ``texts``; nothing else changes."""
    for rail in warned(b.run.settings.guardrails, on, texts):
        b.emit(ev.GUARDRAIL_WARNED, name=rail.name, on=on, what=rail.what, message=rail.says(), **where)


def withheld(tripwire: str) -> str:
    return f"[withheld: {tripwire}]"
