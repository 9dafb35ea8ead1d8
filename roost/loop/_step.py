"""The agent loop's rules: ``step(state, input) -> Transition(events, effects)``.

Everything that decides what a run does next lives in this module. The rules:

- A session is IDLE, or has one run in flight that waits for the MODEL or for TOOLS.
- ``Submit`` needs IDLE: it starts a run (``run.started``, ``message.user``) and the first
  model call (``step.started`` + CallModel). Each model call is one turn.
- ``ModelFinished`` needs MODEL. A malformed reply (a tool_use block without an id or a
  name, two with one id) counts as ``ModelFailed``. The reply is stored
  (``message.assistant``) and each tool call in it, in the model's order, gets
  ``tool.started``, or, when it waits for approval, ``permission.requested`` in its place
  (it starts once approved; phase TOOLS). The calls are answered with errors and the run ends when the reply was cut off
  (``max_tokens``), trips an output guardrail (``guardrail``), or makes the same calls as the
  three replies before it (``stuck``). A call to a tool the run does not have (not in
  ``run.started``'s ``tools``, the agent's list) is answered with an error at once, in
  every mode: never run, never asked about. Otherwise each call is decided by the permission
  policy (:func:`roost.loop.decide`, on the real paths in ``ModelFinished.resolved``):
  allowed calls run (RunTool); denied ones are answered
  with an error the model sees; the others wait for a person (StartClock when approvals
  time out). A call to a tool that is an agent starts it as a
  sub-agent (StartSubagent); its final text comes back as the call's ToolFinished. So does a
  call to ``task`` (:data:`TASK`), for the agent it names (``agent``, or Claude Code's
  ``subagent_type``) among the run's ``delegates``, with its ``prompt``; an unknown agent
  is an error result that lists them. Sub-agents nest at most :data:`SUBAGENT_DEPTH` deep:
  a run that deep (its settings' ``depth``) gets an error result instead. ``ask_human``
  calls wait for an answer (``human.asked``). A reply with no tool calls ends the run ``done``, unless steering is
  queued, which starts another model call; a refusal (stop reason ``refusal``) ends it ``error``.
- Stop hooks: in a run that has them, a reply that would end the run ``done`` first yields
  ``stop_hooks.started`` + RunStopHooks (phase STOP). ``StopHooksFinished`` with a reason
  makes the run go on: the reason (through the input guardrails) becomes a user message of
  origin ``hook`` and the next model call starts, unless every turn is used (``max_turns``).
  Without one, queued steering starts the next call, else the run ends ``done``.
- ``Submit`` may carry ``context`` (what UserPromptSubmit hooks added: user messages of
  origin ``hook`` after the task, through the same guardrails) and ``command`` (the custom
  command the task was expanded from, recorded in ``run.started`` and on the task's message).
- ``PermissionDecided`` needs an open request: ``permission.resolved`` (first answer wins;
  a later one is invalid); approved, the call starts (``tool.started``) and runs (approved
  for the session, exactly the rules the request offered join the session's allow list; a
  request that offered none is approved once); denied, it is answered with the reason,
  never started.
  ``HumanAnswered`` needs an open question: ``human.answered``, and the answer is the result.
- ``ToolFinished`` needs TOOLS and a pending call id that is not waiting for a person. A
  result that trips an input guardrail is stored withheld and the run ends ``guardrail``.
  When the last call of the step is done: ``step.finished``; then the run ends ``max_turns``
  if every turn is used, else queued steering becomes user messages (after three replies
  running with the same calls, a nudge too) and the next model call starts.
- The task, steering and check output pass the input guardrails first; a tripwire ends the
  run ``guardrail`` with its reason as the final text, the content withheld. A guardrail
  whose action is ``warn`` stops nothing: after the content it matched (task, steering, a
  tool's result, check output, a reply) comes ``guardrail.warned``, and the run goes on.
- ``ModelFailed`` needs MODEL: ``error`` and the run ends ``error``.
- ``Steer`` needs a run in flight: ``steer.queued``; the next model call sees it.
- ``Abort`` needs a run in flight: text the model had streamed of a reply in flight is
  stored as a partial ``message.assistant``, pending tool calls are answered "aborted", the
  run ends ``aborted``, and CancelRun stops its model stream and tool processes.
  ``Abort(after_step=True)`` is the graceful stop: ``run.stopping``, and nothing is cut. The
  model's reply in flight and its tool calls finish and are stored; calls that would wait
  for a person (open requests, and those of the reply to come) are refused instead; then,
  where the run would go on (another model call, the exec check, the next attempt), it ends
  ``aborted``. A run that ends by itself at that point ends as it would have (``done``,
  ``max_turns``, ...). Asked again, it changes nothing; a plain ``Abort`` still stops at once.
- Before a model call, when the estimated size of what it would send (the last reported
  usage plus ~4 characters a token after it) crosses ``compact_at`` of the model's window,
  and a cut keeps the last ``keep_turns`` replies whole (the cut is always before an
  assistant message, so a call stays with its result): ``compaction.started`` + Summarize
  (phase COMPACT). ``Summarized``: a summary shorter than what it replaces is stored
  (``compacted``) and later calls send the summary (a system prompt layer) and the messages
  from the cut on; otherwise ``compaction.skipped`` and no more tries this run. Then the
  model call starts. A failed summary skips the compaction, it does not fail the run.
  ``Compact`` (idle) is a run of mode ``compact`` that only does this.
- plan mode: no tools are offered, and the first reply ends the run: its tool calls are
  answered with errors, its text is read as steps (``plan``), and the run ends ``done``.
- exec mode: an attempt ends when the loop would end (``done`` or ``max_turns``, which
  counts per attempt); with a check command, ``check.started`` + RunCheck, then
  ``CheckFinished``: exit 0 ends the run ``check_passed``; otherwise, with attempts left,
  "Check failed" and the output go back to the model as a user message and the next attempt
  starts; with none left, ``check_failed``. ``Submit`` starts the time box (StartClock);
  ``TimeUp`` ends the run ``timeout``. No check command: one pass, ending as usual.
- Approval timeout: a permission request of a run with ``approval_timeout`` has a deadline
  (StartClock for the call). ``TimeUp`` for the call denies it, by ``timeout``, "no answer
  within N s (the approval timeout)", as a person's denial would; a request answered
  already is left as it is.
- ``Interrupted`` (a run left in flight by a daemon that died): tool calls that started and
  never finished are answered "interrupted", never run again. When calls of the step wait
  for a person (its own, or in a sub-agent the daemon resumes: ``Interrupted.resumed``, whose
  calls are not answered), the run goes on waiting (their clocks start again); otherwise it
  ends ``error``.
  An exec run goes on instead, where it was (see ``_resume_exec``).
- ``RunFailed`` (the daemon could not store the run's events) needs a run in flight: its
  calls are answered with the message, ``error``, and the run ends ``error``.
- A run that ends otherwise closes its open requests first (``permission.resolved`` deny,
  ``human.answered`` cancelled, by ``roost``): every request gets exactly one resolution.
- Every run ends with ``run.finished`` and FinishRun.

Which inputs each phase takes is one table, :data:`PHASE_INPUTS` (at the end of this
module): ``step`` refuses any other first. An input that breaks these rules raises
:class:`InvalidInput`; nothing changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from . import _events as ev
from ._context import cut_point, estimate, messages_tokens, visible
from ._effects import (
    CallModel,
    CancelRun,
    Effect,
    FinishRun,
    RunCheck,
    RunStopHooks,
    RunTool,
    StartClock,
    StartSubagent,
    Summarize,
)
from ._events import Event, safe_text
from ._guardrails import INPUT, OUTPUT, reply_texts, tripped, warned
from ._inputs import (
    Abort,
    CheckFinished,
    Compact,
    CreateSession,
    HumanAnswered,
    Input,
    Interrupted,
    ModelFailed,
    ModelFinished,
    PermissionDecided,
    RunFailed,
    Steer,
    StopHooksFinished,
    Submit,
    Summarized,
    TimeUp,
    ToolFinished,
)
from ._permissions import ALLOW, ASK, ASK_HUMAN, DENY, Decision, decide
from ._plan import parse_plan
from ._modes import COMPACT_MODE, NO_TOOLS_MODES, Mode
from ._settings import RunSettings
from ._waits import HumanWait, PermissionWait
from ._state import Phase, RunState, SessionState, apply, cost

#: The tool that delegates to one of the folder's agents (Claude Code's Task): a call runs
#: the agent it names as a sub-agent.
TASK = "task"

#: How deep sub-agents nest: a run of this depth runs no sub-agent (a session's run is
#: depth 0, its sub-agent 1).
SUBAGENT_DEPTH = 3
#: Replies running with the same tool calls before a nudge, and before the run stops.
STUCK_NUDGE = 3
STUCK_STOP = 4
NUDGE = (
    "You have made exactly the same tool calls {n} times in a row, with the same inputs. "
    "Repeating them will not give a different result: try something else, or stop and say "
    "what is blocking you."
)


class InvalidInput(Exception):
    """An input that the session's phase does not allow. The state is unchanged."""

    def __init__(self, input: Input, phase: Phase, why: str) -> None:
        super().__init__(f"{type(input).__name__} in phase {phase.value}: {why}")
        self.input = input
        self.phase = phase


@dataclass(frozen=True, slots=True)
class Transition:
    """What a step produced: events to store and publish, then effects to perform."""

    events: tuple[Event, ...]
    effects: tuple[Effect, ...]
    #: The state after the events (equal to folding them onto the old state).
    state: SessionState


def step(state: SessionState, input: Input) -> Transition:
    """Decide what ``input`` means for the session. Pure: no IO, no clock, no ids.

    Raises:
        InvalidInput: the input is not allowed in the session's phase.
    """
    takes = PHASE_INPUTS[state.phase]
    if type(input) not in takes:
        names = ", ".join(sorted(t.__name__ for t in takes))
        raise InvalidInput(input, state.phase, f"phase {state.phase.value} takes only {names}")
    builder = _Builder(state, input)
    handler = _HANDLERS[type(input)]
    running = _running_head(state.run)
    handler(builder, input)
    _release_head(builder, running)
    return Transition(tuple(builder.events), tuple(builder.effects), builder.state)


def _changes(run: RunState, name: str) -> bool:
    """Whether a call of ``name`` may change files or state: such calls run one at a time,
    in the order the model gave them (sub-agents and questions are not tool runs)."""
    return name not in run.settings.read_only and name not in run.settings.subagents and name != ASK_HUMAN


def _head(run: RunState) -> str | None:
    """The first pending call that changes things: the only one of them that may run."""
    return next((c for c in run.pending if _changes(run, run.tool_names.get(c, ""))), None)


def _running_head(run: RunState | None) -> str | None:
    """The call that changes things running now (the head, once it is cleared)."""
    if run is None or run.phase is not Phase.TOOLS:
        return None
    head = _head(run)
    return head if head in run.cleared else None


def _release_head(b: _Builder, running: str | None) -> None:
    """Start the head call when it is cleared and was not running before this step."""
    run = b.state.run
    head = _running_head(run)
    if head is not None and head != running:
        assert run is not None
        call = run.cleared[head]
        b.effects.append(RunTool(run.id, head, call["name"], call["input"], bool(call["outside"])))


class _Builder:
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
        for text in self.run.steering:
            self.emit(ev.MESSAGE_USER, text=text, origin="steer")
        if compact and self.start_compaction():
            return
        self.emit(ev.STEP_STARTED, step=self.run.turns + 1)
        run, state = self.run, self.state
        messages = visible(state.messages, state.compacted_upto)
        self.effects.append(CallModel(run.id, run.turns, run.settings.model, messages, run.settings.tools, state.summary))

    def start_compaction(self, force: bool = False) -> bool:
        """Summarize the older history first when the next call would fill too much of the
        window (or ``force``), and there is a cut that keeps the recent replies whole."""
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
        self.effects.append(Summarize(run.id, run.settings.model, older, state.summary))
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
            self.finish_call(call_id, result, is_error=True)

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


def _create_session(b: _Builder, input: CreateSession) -> None:
    b.require(b.state.events == 0, "the session already exists")
    b.emit(ev.SESSION_CREATED, cwd=input.cwd)


def _submit(b: _Builder, input: Submit) -> None:
    settings = input.settings
    problem = settings.problem()
    b.require(problem is None, problem or "")
    recorded = settings.recorded()
    exec_ = settings.mode == Mode.EXEC
    before = b.state.last_tools
    extra = {
        "prompt": [dict(layer) for layer in input.prompt],
        "request_id": input.request_id,
        "deadline": input.ts + settings.time_box if exec_ else None,
        "command": dict(input.command) if input.command is not None else None,
        "hook_failures": list(input.hook_failures),
    }
    b.emit_run_started(
        input.run, task=input.task, **recorded.to_map(), **{k: v for k, v in extra.items() if v}
    )
    if input.untrusted:
        b.emit(ev.PROJECT_UNTRUSTED, **input.untrusted)
    if before is not None and settings.mode not in NO_TOOLS_MODES:
        added = sorted(set(settings.tools) - set(before))
        removed = sorted(set(before) - set(settings.tools))
        if added or removed:
            b.emit(ev.TOOLS_CHANGED, added=added, removed=removed, note=tools_note(added, removed))
    typed = {"command": input.command["typed"]} if input.command is not None else {}
    tripwire = tripped(settings.guardrails, INPUT, [input.task, *input.context, *input.instructions])
    if tripwire is not None:
        b.emit(ev.MESSAGE_USER, text=_withheld(tripwire), origin="task", **typed)
        b.emit_run_finished("guardrail", tripwire, text=tripwire)
        return
    if exec_:
        b.effects.append(StartClock(input.run, input.ts + settings.time_box))
    b.emit(ev.MESSAGE_USER, text=input.task, origin="task", **typed)
    _warn(b, INPUT, [input.task], origin="task")
    for text in input.context:
        b.emit(ev.MESSAGE_USER, text=text, origin="hook")
        _warn(b, INPUT, [text], origin="hook")
    b.start_model_call()


def tools_note(added: list[str], removed: list[str]) -> str:
    """What the model is told of tools that appeared and disappeared since the last run."""
    parts = []
    if removed:
        parts.append(f"no longer available (calls to them fail): {', '.join(removed)}")
    if added:
        parts.append(f"new: {', '.join(added)}")
    said = "; ".join(parts)
    return f"[roost] Your tools changed since this session's last run. {said[0].upper()}{said[1:]}."


def _model_finished(b: _Builder, input: ModelFinished) -> None:
    problem = _malformed(input.content)
    if problem is not None:
        # Stored, such a reply would poison the history of every later call.
        _model_failed(b, ModelFailed(f"the model's reply was malformed: {problem}", input.ts))
        return
    content = [dict(block) for block in input.content]
    b.emit(
        ev.MESSAGE_ASSISTANT,
        content=content,
        usage=dict(input.usage),
        stop_reason=input.stop_reason,
        latency=input.latency,
        **({"ttft": input.ttft} if input.ttft is not None else {}),
        **({"retries": input.retries} if input.retries is not None else {}),
    )
    calls = [block for block in content if block.get("type") == "tool_use"]
    stop = None if b.run.settings.mode == Mode.PLAN else _stop_before_calls(b, input.stop_reason, content)
    if b.run.settings.mode != Mode.PLAN and (stop is None or stop[0] != "guardrail"):
        _warn(b, OUTPUT, reply_texts(content), origin="reply")
    decisions = {}
    if b.run.settings.mode != Mode.PLAN and stop is None:
        decisions = {c["id"]: _decision(b, c["name"], c.get("input", {}), input.resolved) for c in calls}
    # A call that waits for approval has not started: its request stands where its start
    # would, and it starts once approved.
    asks = {c["id"] for c in calls if _asks(b.run, decisions.get(c["id"]))}
    for call in calls:
        decision = decisions.get(call["id"])
        if call["id"] in asks:
            assert decision is not None
            _ask(b, call["id"], call["name"], call.get("input", {}), decision, input.diffs.get(call["id"]))
        else:
            allowed = decision if decision is not None and decision.action == ALLOW else None
            b.start_tool(call["id"], call["name"], call.get("input", {}), allowed is not None, bool(allowed and allowed.outside))
    if b.run.settings.mode == Mode.PLAN:
        # One call, no tools: whatever the model asked for is answered, never run.
        for call in calls:
            b.finish_call(call["id"], "not run: plan mode runs no tools", is_error=True)
        _finish_step(b)
        b.emit(ev.PLAN, steps=parse_plan(b.run.text), text=b.run.text)
        b.emit_run_finished("done" if input.stop_reason != "max_tokens" else "max_tokens")
        return
    if stop is not None:
        reason, why, note = stop
        for call in calls:
            b.finish_call(call["id"], note, is_error=True)
        _finish_step(b)
        if reason == "max_tokens":
            b.emit_run_finished(reason)
        else:
            b.emit_run_finished(reason, why, text=why)
        return
    if calls:
        for call in calls:
            if call["id"] not in asks:
                _start_call(b, call["id"], call["name"], call.get("input", {}), decisions[call["id"]])
        return
    _finish_step(b)
    if input.stop_reason == "refusal":
        # Not a finished task: scripts must be able to tell (the exit status says error).
        b.emit_run_finished("error", "the model declined to go on (stop reason: refusal)")
        return
    _continue_or_finish(b, after_tools=False)


def _stop_before_calls(b: _Builder, stop_reason: str, content: list[dict[str, Any]]) -> tuple[str, str, str] | None:
    """Whether the reply ends the run before its calls run: (reason, why, note for the calls)."""
    if stop_reason == "max_tokens":
        return "max_tokens", "", "not run: the reply was cut off at max_tokens"
    tripwire = tripped(b.run.settings.guardrails, OUTPUT, reply_texts(content))
    if tripwire is not None:
        return "guardrail", tripwire, f"not run: {tripwire}"
    if b.run.repeats >= STUCK_STOP:
        why = f"stuck: the model made the same tool calls {b.run.repeats} times in a row"
        return "stuck", why, "not run: " + why
    return None


def _decision(b: _Builder, name: str, input: Mapping[str, Any], resolved: Mapping[str, str]) -> Decision | None:
    """What the permission policy says of a call (None: a call it does not judge: a tool the
    run lacks, a question, a sub-agent)."""
    run = b.run
    if name not in run.settings.tools or name == ASK_HUMAN or name in run.settings.subagents:
        return None
    return decide(run.settings.policy, run.settings.mode, b.state.allowed, name, input, b.state.cwd, resolved)


def _asks(run: RunState, decision: Decision | None) -> bool:
    """Whether a call so decided waits for a person's approval (not in a run that stops
    after this step: nobody is asked any more)."""
    return decision is not None and decision.action == ASK and run.stopping is None


def _ask(b: _Builder, call_id: str, name: str, input: Mapping[str, Any], decision: Decision, diff: str | None) -> None:
    """Ask a person about a call (``permission.requested``), with a clock when approvals
    time out."""
    run = b.run
    deadline = b.input.ts + run.settings.approval_timeout if run.settings.approval_timeout else None
    b.emit(
        ev.PERMISSION_REQUESTED,
        call_id=call_id,
        tool=name,
        input=dict(input),
        reason=decision.reason,
        session_rules=list(decision.session_rules),
        outside=decision.outside,
        **({"diff": diff} if diff else {}),
        **({"deadline": deadline} if deadline is not None else {}),
    )
    if deadline is not None:
        b.effects.append(StartClock(run.id, deadline, call_id))


def _start_call(b: _Builder, call_id: str, name: str, input: Mapping[str, Any], decision: Decision | None) -> None:
    """A started call of the reply: run it, refuse it, or ask its question. A call that
    changes things runs when it is the first pending one (see ``_release_head``)."""
    run = b.run
    if run.stopping is not None and (name == ASK_HUMAN or (decision is not None and decision.action == ASK)):
        # The run ends after this step: nobody is asked any more.
        b.finish_call(call_id, f"not run: {_STOPPING}", is_error=True)
        _after_call(b)
        return
    if name not in run.settings.tools:
        # The agent's tool list holds in every mode: such a call is never run nor asked about.
        b.finish_call(call_id, f"the {run.settings.agent} agent has no tool {name}", is_error=True, meta={"no_tool": True})
        _after_call(b)
        return
    if name == ASK_HUMAN:
        problem = _question_problem(input)
        if problem is not None:
            b.finish_call(call_id, f"invalid input for ask_human: {problem}", is_error=True)
            _after_call(b)
        else:
            b.emit(ev.HUMAN_ASKED, call_id=call_id, question=input["question"], choices=list(input.get("choices", ())))
        return
    if name in run.settings.subagents:
        # Delegation itself is not a risk: the sub-agent's own calls are decided one by one.
        target = _task_target(input, run.settings.delegates) if name == TASK else _agent_target(name, input)
        if isinstance(target, str):
            b.finish_call(call_id, f"invalid input for {name}: {target}", is_error=True)
            _after_call(b)
        elif run.settings.depth >= SUBAGENT_DEPTH:
            b.finish_call(call_id, f"sub-agents nest at most {SUBAGENT_DEPTH} deep; do this part yourself", is_error=True)
            _after_call(b)
        else:
            b.effects.append(StartSubagent(run.id, call_id, *target))
        return
    assert decision is not None
    if decision.action == DENY:
        b.finish_call(call_id, f"permission denied: {decision.reason}", is_error=True, meta={"denied": True})
        _after_call(b)
    else:
        assert decision.action == ALLOW
        if not _changes(run, name):
            b.effects.append(RunTool(run.id, call_id, name, input, decision.outside))


def _agent_target(name: str, input: Mapping[str, Any]) -> tuple[str, str] | str:
    """The agent and the task of a call to the agent-tool ``name``, or what is wrong."""
    message = input.get("message")
    if not isinstance(message, str) or not message.strip():
        return "message must be a non-empty string"
    return name, message


def _task_target(input: Mapping[str, Any], delegates: tuple[str, ...]) -> tuple[str, str] | str:
    """The agent and the task of a ``task`` call (Claude Code's names accepted too), or what
    is wrong: an unknown agent's error lists those there are."""
    agent = input.get("agent", input.get("subagent_type"))
    if not isinstance(agent, str) or agent not in delegates:
        what = f"there is no agent {agent!r} to delegate to" if isinstance(agent, str) else "agent must name an agent"
        return f"{what}; the agents: {', '.join(delegates) or 'none'}"
    prompt = input.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return "prompt must be a non-empty string: the task, complete on its own"
    return agent, prompt


def _question_problem(input: Mapping[str, Any]) -> str | None:
    question, choices = input.get("question"), input.get("choices", [])
    if not isinstance(question, str) or not question.strip():
        return "question must be a non-empty string"
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        return "choices must be a list of strings"
    return None


def _permission_decided(b: _Builder, input: PermissionDecided) -> None:
    wait = b.run.waiting.get(input.call_id)
    b.require(isinstance(wait, PermissionWait), f"no open permission request {input.call_id!r}")
    assert isinstance(wait, PermissionWait)
    b.require(input.scope in ("once", "session"), "scope must be once or session")
    # Exactly the rules that the request offered to add, as every client was shown them;
    # a request that offered none can only be approved once.
    rules = list(wait.session_rules) if input.approve and input.scope == "session" else []
    scope = "session" if rules else "once"
    b.emit(
        ev.PERMISSION_RESOLVED,
        call_id=input.call_id,
        tool=wait.name,
        decision="approve" if input.approve else "deny",
        scope=scope,
        client=input.client,
        **({"reason": input.reason} if input.reason else {}),
        **({"rules": rules} if rules else {}),
    )
    if input.approve:
        if not wait.started:
            b.start_tool(input.call_id, wait.name, wait.input, True, wait.outside)
        if not _changes(b.run, wait.name):
            b.effects.append(RunTool(b.run.id, input.call_id, wait.name, wait.input, wait.outside))
        return
    who = input.client or "a person"
    because = f": {input.reason}" if input.reason else ""
    b.finish_call(input.call_id, f"denied by {who}{because}", is_error=True, meta={"denied": True})
    _after_call(b)


def _human_answered(b: _Builder, input: HumanAnswered) -> None:
    wait = b.run.waiting.get(input.call_id)
    b.require(isinstance(wait, HumanWait), f"no open question {input.call_id!r}")
    b.emit(ev.HUMAN_ANSWERED, call_id=input.call_id, answer=input.answer, client=input.client)
    b.finish_call(input.call_id, input.answer, is_error=False)
    _after_call(b)


def _warn(b: _Builder, on: str, texts: list[str], **where: Any) -> None:
    """Say which guardrails that only warn match ``texts``; nothing else changes."""
    for rail in warned(b.run.settings.guardrails, on, texts):
        b.emit(ev.GUARDRAIL_WARNED, name=rail.name, on=on, what=rail.what, message=rail.says(), **where)


def _withheld(tripwire: str) -> str:
    return f"[withheld: {tripwire}]"


def _malformed(content: tuple[Any, ...]) -> str | None:
    ids: set[str] = set()
    for block in content:
        if not isinstance(block, Mapping) or not isinstance(block.get("type"), str):
            return "a content block is not a map with a type"
        if block["type"] != "tool_use":
            continue
        call_id, name = block.get("id"), block.get("name")
        if not isinstance(call_id, str) or not call_id or not isinstance(name, str) or not name:
            return "a tool_use block has no id or no name"
        if call_id in ids:
            return f"two tool_use blocks share the id {call_id!r}"
        if not isinstance(block.get("input", {}), Mapping):
            return f"tool_use {call_id!r} has an input that is not an object"
        ids.add(call_id)
    return None


def _compact(b: _Builder, input: Compact) -> None:
    b.require(input.keep_turns >= 0, "keep_turns must not be negative")
    settings = RunSettings(input.model, mode=COMPACT_MODE, max_turns=1, keep_turns=input.keep_turns)
    b.emit_run_started(input.run, task="compact the history", **settings.to_map(), keep_turns=input.keep_turns)
    if not b.start_compaction(force=True):
        b.emit_run_finished("done", text="nothing to compact: the history is shorter than the replies kept")


def _summarized(b: _Builder, input: Summarized) -> None:
    run, state = b.run, b.state
    start, upto = state.compacted_upto, run.compact_upto
    replaced = messages_tokens(state.messages[start:upto]) + messages_tokens(
        [{"content": [{"type": "text", "text": state.summary}]}]
    )
    summary = input.summary.strip()
    size = messages_tokens([{"content": [{"type": "text", "text": summary}]}])
    if summary and size < replaced:
        b.emit(ev.COMPACTED, summary=summary, upto=upto, replaced_tokens=replaced, summary_tokens=size,
               usage=dict(input.usage))
        note = f"compacted {replaced:,} tokens of history into a {size:,}-token summary"
    else:
        b.emit(ev.COMPACTION_SKIPPED, reason=f"the summary ({size:,} tokens) would not be shorter than the history ({replaced:,})")
        note = "nothing compacted"
    if run.settings.mode == COMPACT_MODE:
        b.emit_run_finished("done", text=note)
    else:
        b.start_model_call(compact=False)


def _model_failed(b: _Builder, input: ModelFailed) -> None:
    # In MODEL a reply failed; in COMPACT, a summary (see the table).
    if b.state.phase is Phase.COMPACT and b.run.settings.mode != COMPACT_MODE:
        # A failed summary costs the compaction, not the run: it goes on uncompacted.
        b.emit(ev.COMPACTION_SKIPPED, reason=f"the summary failed: {input.message}")
        b.start_model_call(compact=False)
        return
    if b.state.phase is Phase.COMPACT:
        b.emit(ev.ERROR, message=input.message)
        b.emit_run_finished("error", input.message)
        return
    b.emit(ev.ERROR, message=input.message)
    _finish_step(b)
    b.emit_run_finished("error", input.message)


def _tool_finished(b: _Builder, input: ToolFinished) -> None:
    b.require(input.call_id in b.run.pending, f"no pending tool call {input.call_id!r}")
    b.require(input.call_id not in b.run.waiting, f"tool call {input.call_id!r} is waiting for a person")
    tripwire = tripped(b.run.settings.guardrails, INPUT, [input.result])
    if tripwire is not None:
        # Stored withheld: the history must never carry the content to a model later.
        b.finish_call(input.call_id, _withheld(tripwire), is_error=True, latency=input.latency)
        b.stop("guardrail", tripwire, f"not run: {tripwire}")
        return
    b.finish_call(input.call_id, input.result, is_error=input.is_error, latency=input.latency, meta=input.meta)
    _warn(b, INPUT, [input.result], origin="tool", call_id=input.call_id)
    _after_call(b)


def _after_call(b: _Builder) -> None:
    """After a call's result: when it was the step's last, the run goes on."""
    if b.run.pending:
        return
    _finish_step(b)
    _continue_or_finish(b, after_tools=True)


def _continue_or_finish(b: _Builder, after_tools: bool) -> None:
    # After tool results the model must see them; after a final reply only queued
    # steering keeps the run going.
    run = b.run
    if not after_tools and not run.steering:
        if run.settings.stop_hooks:
            # The hooks may yet make the run go on (StopHooksFinished decides).
            b.emit(ev.STOP_HOOKS_STARTED, active=run.stop_blocks > 0)
            b.effects.append(RunStopHooks(run.id, run.stop_blocks > 0, run.text))
        else:
            _end_attempt(b, "done")
    elif run.turns - run.attempt_turns >= run.settings.max_turns:
        _end_attempt(b, "max_turns")
    elif run.stopping is not None:
        b.emit_run_finished("aborted", run.stopping)
    else:
        if after_tools and run.repeats == STUCK_NUDGE:
            b.emit(ev.MESSAGE_USER, text=NUDGE.format(n=run.repeats), origin="nudge")
        b.start_model_call()


def _end_attempt(b: _Builder, reason: str) -> None:
    # exec mode with a check: every attempt ends by running it; otherwise the run ends.
    run = b.run
    if run.settings.check is None:
        b.emit_run_finished(reason)
        return
    if run.stopping is not None:
        b.emit_run_finished("aborted", run.stopping)
        return
    b.emit(ev.CHECK_STARTED, attempt=run.attempt, command=run.settings.check)
    b.effects.append(RunCheck(run.id, run.attempt, run.settings.check))


def _stop_hooks_finished(b: _Builder, input: StopHooksFinished) -> None:
    run = b.run
    b.emit(
        ev.STOP_HOOKS_FINISHED,
        **({"reason": input.reason} if input.reason else {}),
        **({"failures": list(input.failures)} if input.failures else {}),
    )
    if not input.reason and not run.steering:
        _end_attempt(b, "done")
        return
    if run.turns - run.attempt_turns >= run.settings.max_turns:
        _end_attempt(b, "max_turns")
        return
    if input.reason:
        tripwire = tripped(run.settings.guardrails, INPUT, [input.reason])
        if tripwire is not None:
            b.emit(ev.MESSAGE_USER, text=_withheld(tripwire), origin="hook")
            b.emit_run_finished("guardrail", tripwire, text=tripwire)
            return
        b.emit(ev.MESSAGE_USER, text=input.reason, origin="hook")
        _warn(b, INPUT, [input.reason], origin="hook")
    b.start_model_call()


def _check_finished(b: _Builder, input: CheckFinished) -> None:
    run = b.run
    tripwire = tripped(run.settings.guardrails, INPUT, [input.output])
    b.emit(
        ev.CHECK_FINISHED,
        attempt=run.attempt,
        exit_status=input.exit_status,
        duration=input.duration,
        output=input.output if tripwire is None else _withheld(tripwire),
    )
    if tripwire is None:
        _warn(b, INPUT, [input.output], origin="check")
    if tripwire is not None:
        b.emit_run_finished("guardrail", tripwire, text=tripwire)
    elif input.exit_status == 0:
        b.emit_run_finished("check_passed")
    elif run.attempt >= run.settings.attempts:
        b.emit_run_finished("check_failed")
    elif run.stopping is not None:
        b.emit_run_finished("aborted", run.stopping)
    else:
        note = f"Check failed (exit status {input.exit_status}). Its output:\n{input.output}"
        b.emit(ev.MESSAGE_USER, text=note, origin="check")
        b.start_model_call()


def _time_up(b: _Builder, input: TimeUp) -> None:
    if input.call_id is not None:
        _approval_timed_out(b, input.call_id)
        return
    b.answer_pending("aborted: the run's time box ran out")
    b.effects.append(CancelRun(b.run.id))
    b.emit_run_finished("timeout", "the time box ran out")


def _approval_timed_out(b: _Builder, call_id: str) -> None:
    """Nobody answered the call's permission request in time: it is denied."""
    wait = b.run.waiting.get(call_id)
    if not isinstance(wait, PermissionWait):
        return  # answered in time: the clock has nothing left to deny
    b.require(wait.deadline is not None, f"the request of {call_id!r} never times out")
    assert wait.deadline is not None
    reason = f"no answer within {wait.deadline - wait.ts:g} s (the approval timeout)"
    _permission_decided(b, PermissionDecided(call_id, False, b.input.ts, reason=reason, client="timeout"))


def _finish_step(b: _Builder) -> None:
    run = b.run
    extra = {"cost": cost(run.step_usage, run.settings.price)} if run.settings.price is not None else {}
    b.emit(
        ev.STEP_FINISHED,
        step=run.turns,
        usage=dict(run.step_usage),
        latency=max(0.0, b.input.ts - run.step_started),
        **extra,
    )


def _steer(b: _Builder, input: Steer) -> None:
    b.require(bool(input.text.strip()), "steering text is empty")
    tripwire = tripped(b.run.settings.guardrails, INPUT, [input.text])
    if tripwire is not None:
        b.stop("guardrail", tripwire, f"not run: {tripwire}")
        return
    b.emit(ev.STEER_QUEUED, text=input.text)
    _warn(b, INPUT, [input.text], origin="steer")


def _abort(b: _Builder, input: Abort) -> None:
    if input.after_step:
        _stop_after_step(b, input)
        return
    partial = [dict(b) for b in input.partial if b.get("type") == "text" and b.get("text")]
    if b.state.phase is Phase.MODEL and partial:
        # What had arrived is kept: the user saw it, and the next run's model should too.
        b.emit(
            ev.MESSAGE_ASSISTANT,
            content=partial,
            usage={},
            stop_reason="aborted",
            latency=0.0,
            partial=True,
        )
    b.answer_pending("aborted: " + input.reason)
    b.effects.append(CancelRun(b.run.id))
    b.emit_run_finished("aborted", input.reason)


_STOPPING = "the run was asked to stop after this step"


def _stop_after_step(b: _Builder, input: Abort) -> None:
    """The graceful stop: the step in flight finishes; nobody is asked any more."""
    if b.run.stopping is not None:
        return  # asked already
    b.emit(ev.RUN_STOPPING, reason=input.reason)
    for call_id, wait in b.run.waiting.items():
        if isinstance(wait, PermissionWait):
            b.emit(ev.PERMISSION_RESOLVED, call_id=call_id, tool=wait.name, decision="deny", scope="once",
                   reason=_STOPPING, client="roost")
        else:
            b.emit(ev.HUMAN_ANSWERED, call_id=call_id, answer="", client="roost", cancelled=True)
        b.finish_call(call_id, f"not run: {_STOPPING}", is_error=True)
    if b.state.phase is Phase.TOOLS and not b.run.pending:
        _after_call(b)


def _interrupted(b: _Builder, input: Interrupted) -> None:
    run = b.run
    resumed = tuple(c for c in input.resumed if c in run.pending and run.tool_names.get(c) in run.settings.subagents)
    if run.settings.mode == Mode.EXEC:
        _resume_exec(b, resumed)
        return
    if run.phase is Phase.TOOLS and (run.waiting or resumed):
        # People may still answer (here, or in a sub-agent the daemon resumes): the run
        # waits on, and what was running is reported.
        b.answer_pending(
            "interrupted: the daemon stopped while this tool ran; it was not run again",
            keep_waiting=True,
            keep=resumed,
        )
        b.effects.extend(_approval_clocks(run))
        if run.deadline is not None:
            b.effects.append(StartClock(run.id, run.deadline))
        return
    b.answer_pending("interrupted: the daemon stopped while this tool ran; it was not run again")
    b.emit_run_finished("error", "interrupted: the daemon stopped during the run")


def _approval_clocks(run: RunState) -> list[StartClock]:
    """The clocks of the run's open permission requests that time out, started again."""
    return [
        StartClock(run.id, wait.deadline, call_id)
        for call_id, wait in run.waiting.items()
        if isinstance(wait, PermissionWait) and wait.deadline is not None
    ]


def _run_failed(b: _Builder, input: RunFailed) -> None:
    b.emit(ev.ERROR, message=input.message)
    b.stop("error", input.message, "not finished: " + input.message)


def _resume_exec(b: _Builder, resumed: tuple[str, ...]) -> None:
    """An exec run goes on after a restart, where it was: tools that were running are
    reported interrupted (never run again), a model call or check in flight starts over,
    and the time box keeps its deadline."""
    run, state = b.run, b.state
    if run.deadline is not None:
        b.effects.append(StartClock(run.id, run.deadline))
    b.effects.extend(_approval_clocks(run))
    if run.phase is Phase.TOOLS:
        b.answer_pending(
            "interrupted: the daemon stopped while this tool ran; it was not run again", keep_waiting=True, keep=resumed
        )
        _after_call(b)
    elif run.phase is Phase.MODEL:
        messages = visible(state.messages, state.compacted_upto)
        b.effects.append(CallModel(run.id, run.turns, run.settings.model, messages, run.settings.tools, state.summary))
    elif run.phase is Phase.CHECK:
        assert run.settings.check is not None
        b.effects.append(RunCheck(run.id, run.attempt, run.settings.check))
    elif run.phase is Phase.COMPACT:
        b.emit(ev.COMPACTION_SKIPPED, reason="the daemon stopped during the summary")
        b.start_model_call(compact=False)
    elif run.phase is Phase.STOP:
        b.effects.append(RunStopHooks(run.id, run.stop_blocks > 0, run.text))


#: The state table (h11's ``_state.py`` is the anchor): the inputs each phase takes. ``step``
#: refuses any other before a rule runs; a handler checks only what the phase cannot say
#: (which call, which request, values in range).
_IN_A_RUN = (Steer, Abort, Interrupted, TimeUp, RunFailed)
PHASE_INPUTS: Mapping[Phase, frozenset[type]] = {
    # No run: a new session's first event, a task, or a compaction.
    Phase.IDLE: frozenset({CreateSession, Submit, Compact}),
    # A model call in flight: its reply or its failure.
    Phase.MODEL: frozenset({ModelFinished, ModelFailed, *_IN_A_RUN}),
    # Tool calls in flight: their results, and people's answers to the calls that wait.
    Phase.TOOLS: frozenset({ToolFinished, PermissionDecided, HumanAnswered, *_IN_A_RUN}),
    # exec mode's check in flight.
    Phase.CHECK: frozenset({CheckFinished, *_IN_A_RUN}),
    # A summary in flight: it, or its failure.
    Phase.COMPACT: frozenset({Summarized, ModelFailed, *_IN_A_RUN}),
    # The Stop hooks in flight: their answer.
    Phase.STOP: frozenset({StopHooksFinished, *_IN_A_RUN}),
}

_HANDLERS: dict[type, Any] = {
    CreateSession: _create_session,
    Submit: _submit,
    ModelFinished: _model_finished,
    ModelFailed: _model_failed,
    ToolFinished: _tool_finished,
    Steer: _steer,
    Abort: _abort,
    Interrupted: _interrupted,
    RunFailed: _run_failed,
    CheckFinished: _check_finished,
    TimeUp: _time_up,
    PermissionDecided: _permission_decided,
    HumanAnswered: _human_answered,
    Compact: _compact,
    Summarized: _summarized,
    StopHooksFinished: _stop_hooks_finished,
}
