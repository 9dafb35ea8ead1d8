"""exec mode's check, and the clocks: ``CheckFinished`` ends the run (passed, failed, out of
attempts) or starts the next attempt; ``TimeUp`` ends a run whose time box ran out, or
denies a call whose permission request nobody answered in time."""

from __future__ import annotations

from . import _events as ev
from ._effects import CancelRun
from ._guardrails import INPUT, tripped
from ._inputs import CheckFinished, PermissionDecided, TimeUp
from ._step_answers import permission_decided
from ._step_builder import Builder, warn, withheld
from ._waits import PermissionWait


def check_finished(b: Builder, input: CheckFinished) -> None:
    run = b.run
    tripwire = tripped(run.settings.guardrails, INPUT, [input.output])
    b.emit(
        ev.CHECK_FINISHED,
        attempt=run.attempt,
        exit_status=input.exit_status,
        duration=input.duration,
        output=input.output if tripwire is None else withheld(tripwire),
    )
    if tripwire is None:
        warn(b, INPUT, [input.output], origin="check")
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


def time_up(b: Builder, input: TimeUp) -> None:
    if input.call_id is not None:
        _approval_timed_out(b, input.call_id)
        return
    b.answer_pending("aborted: the run's time box ran out")
    b.effects.append(CancelRun(b.run.id))
    b.emit_run_finished("timeout", "the time box ran out")


def _approval_timed_out(b: Builder, call_id: str) -> None:
    """Nobody answered the call's permission request in time: it is denied."""
    wait = b.run.waiting.get(call_id)
    if not isinstance(wait, PermissionWait):
        return  # answered in time: the clock has nothing left to deny
    b.require(wait.deadline is not None, f"the request of {call_id!r} never times out")
    assert wait.deadline is not None
    reason = f"no answer within {wait.deadline - wait.ts:g} s (the approval timeout)"
    permission_decided(b, PermissionDecided(call_id, False, b.input.ts, reason=reason, client="timeout"))
