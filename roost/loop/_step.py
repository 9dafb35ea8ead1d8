"""The agent loop's rules: ``step(state, input) -> Transition(events, effects)``.

Everything that decides what a run does next is stated here. This module holds ``step`` and
the table of the inputs each phase takes; the rules live in the modules of their subjects:
``_step_start`` (a session, a run's start), ``_step_replies`` (a model's reply and its
calls), ``_step_answers`` (tool results, approvals, answers, steering), ``_step_turns`` (a
step's end: the next call, the Stop hooks, the check, or the run's end), ``_step_exec``
(exec mode's check, the clocks), ``_step_compaction``, ``_step_endings`` (aborts,
restarts, failures), all writing through ``_step_builder``'s Builder. The rules:

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
  An exec run goes on instead, where it was (see ``_step_endings``).
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

from ._effects import Effect
from ._events import Event
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
from ._state import Phase, SessionState
from ._step_answers import human_answered, permission_decided, steer, tool_finished
from ._step_builder import Builder, InvalidInput, release_head, running_head
from ._step_compaction import compact, summarized
from ._step_endings import abort, interrupted, run_failed
from ._step_exec import check_finished, time_up
from ._step_replies import model_failed, model_finished
from ._step_start import create_session, submit
from ._step_turns import stop_hooks_finished


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
    builder = Builder(state, input)
    handler = _HANDLERS[type(input)]
    running = running_head(state.run)
    handler(builder, input)
    release_head(builder, running)
    return Transition(tuple(builder.events), tuple(builder.effects), builder.state)


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
    CreateSession: create_session,
    Submit: submit,
    ModelFinished: model_finished,
    ModelFailed: model_failed,
    ToolFinished: tool_finished,
    Steer: steer,
    Abort: abort,
    Interrupted: interrupted,
    RunFailed: run_failed,
    CheckFinished: check_finished,
    TimeUp: time_up,
    PermissionDecided: permission_decided,
    HumanAnswered: human_answered,
    Compact: compact,
    Summarized: summarized,
    StopHooksFinished: stop_hooks_finished,
}
