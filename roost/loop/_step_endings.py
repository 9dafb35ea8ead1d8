"""Runs that end or stop from outside: ``Abort`` (at once, or gracefully after the step in
flight), ``Interrupted`` (a daemon that died with the run in flight: it waits on for people,
an exec run goes on where it was, anything else ends ``error``) and ``RunFailed``."""

from __future__ import annotations

from . import _events as ev
from ._context import visible
from ._effects import CallModel, CancelRun, RunCheck, RunStopHooks, StartClock
from ._inputs import Abort, Interrupted, RunFailed
from ._modes import Mode
from ._state import Phase, RunState
from ._step_builder import Builder
from ._step_turns import after_call
from ._waits import PermissionWait

#: What a call that would wait for a person is told in a run stopping after the step.
STOPPING = "the run was asked to stop after this step"


def abort(b: Builder, input: Abort) -> None:
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


def _stop_after_step(b: Builder, input: Abort) -> None:
    """The graceful stop: the step in flight finishes; nobody is asked any more."""
    if b.run.stopping is not None:
        return  # asked already
    b.emit(ev.RUN_STOPPING, reason=input.reason)
    for call_id, wait in b.run.waiting.items():
        if isinstance(wait, PermissionWait):
            b.emit(ev.PERMISSION_RESOLVED, call_id=call_id, tool=wait.name, decision="deny", scope="once",
                   reason=STOPPING, client="roost")
        else:
            b.emit(ev.HUMAN_ANSWERED, call_id=call_id, answer="", client="roost", cancelled=True)
        b.finish_call(call_id, f"not run: {STOPPING}", is_error=True)
    if b.state.phase is Phase.TOOLS and not b.run.pending:
        after_call(b)


def interrupted(b: Builder, input: Interrupted) -> None:
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


def run_failed(b: Builder, input: RunFailed) -> None:
    b.emit(ev.ERROR, message=input.message)
    b.stop("error", input.message, "not finished: " + input.message)


def _resume_exec(b: Builder, resumed: tuple[str, ...]) -> None:
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
        after_call(b)
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
