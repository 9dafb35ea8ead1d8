"""How a step ends and whether the run goes on: ``step.finished`` once the step's last call
is answered, then the next model call (queued steering first; a nudge after replies that
repeat their calls), the Stop hooks, exec mode's check, or the run's end (``done``,
``max_turns``; ``aborted`` for a run asked to stop after the step)."""

from __future__ import annotations

from . import _events as ev
from ._effects import RunCheck, RunStopHooks
from ._guardrails import INPUT, tripped
from ._inputs import StopHooksFinished
from ._state import cost
from ._step_builder import Builder, warn, withheld


#: Replies running with the same tool calls before a nudge, and before the run stops.
STUCK_NUDGE = 3
STUCK_STOP = 4
NUDGE = (
    "You have made exactly the same tool calls {n} times in a row, with the same inputs. "
    "Repeating them will not give a different result: try something else, or stop and say "
    "what is blocking you."
)


def finish_step(b: Builder) -> None:
    run = b.run
    extra = {"cost": cost(run.step_usage, run.settings.price)} if run.settings.price is not None else {}
    b.emit(
        ev.STEP_FINISHED,
        step=run.turns,
        usage=dict(run.step_usage),
        latency=max(0.0, b.input.ts - run.step_started),
        **extra,
    )


def after_call(b: Builder) -> None:
    """After a call's result: when it was the step's last, the run goes on."""
    if b.run.pending:
        return
    finish_step(b)
    continue_or_finish(b, after_tools=True)


def continue_or_finish(b: Builder, after_tools: bool) -> None:
    # After tool results the model must see them; after a final reply only queued
    # steering keeps the run going.
    run = b.run
    if not after_tools and not run.steering:
        if run.settings.stop_hooks:
            # The hooks may yet make the run go on (StopHooksFinished decides).
            b.emit(ev.STOP_HOOKS_STARTED, active=run.stop_blocks > 0)
            b.effects.append(RunStopHooks(run.id, run.stop_blocks > 0, run.text))
        else:
            end_attempt(b, "done")
    elif run.turns - run.attempt_turns >= run.settings.max_turns:
        end_attempt(b, "max_turns")
    elif run.stopping is not None:
        b.emit_run_finished("aborted", run.stopping)
    else:
        if after_tools and run.repeats == STUCK_NUDGE:
            b.emit(ev.MESSAGE_USER, text=NUDGE.format(n=run.repeats), origin="nudge")
        b.start_model_call()


def end_attempt(b: Builder, reason: str) -> None:
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


def stop_hooks_finished(b: Builder, input: StopHooksFinished) -> None:
    run = b.run
    b.emit(
        ev.STOP_HOOKS_FINISHED,
        **({"reason": input.reason} if input.reason else {}),
        **({"failures": list(input.failures)} if input.failures else {}),
    )
    if not input.reason and not run.steering:
        end_attempt(b, "done")
        return
    if run.turns - run.attempt_turns >= run.settings.max_turns:
        end_attempt(b, "max_turns")
        return
    if input.reason:
        tripwire = tripped(run.settings.guardrails, INPUT, [input.reason])
        if tripwire is not None:
            b.emit(ev.MESSAGE_USER, text=withheld(tripwire), origin="hook")
            b.emit_run_finished("guardrail", tripwire, text=tripwire)
            return
        b.emit(ev.MESSAGE_USER, text=input.reason, origin="hook")
        warn(b, INPUT, [input.reason], origin="hook")
    b.start_model_call()
