"""What comes back to a step's calls: a tool's result (through the input guardrails), a
person's approval or denial of a call, a person's answer to a question; and steering, a
person's words for the next model call."""

from __future__ import annotations

from . import _events as ev
from ._effects import RunTool
from ._guardrails import INPUT, tripped
from ._inputs import APPROVAL_SCOPES, SESSION_ANY, HumanAnswered, PermissionDecided, Steer, ToolFinished
from ._step_builder import Builder, changes, warn, withheld
from ._step_turns import after_call
from ._waits import HumanWait, PermissionWait


def tool_finished(b: Builder, input: ToolFinished) -> None:
    b.require(input.call_id in b.run.pending, f"no pending tool call {input.call_id!r}")
    b.require(input.call_id not in b.run.waiting, f"tool call {input.call_id!r} is waiting for a person")
    tripwire = tripped(b.run.settings.guardrails, INPUT, [input.result])
    if tripwire is not None:
        # Stored withheld: the history must never carry the content to a model later.
        b.finish_call(input.call_id, withheld(tripwire), is_error=True, latency=input.latency)
        b.stop("guardrail", tripwire, f"not run: {tripwire}")
        return
    b.finish_call(
        input.call_id, input.result, is_error=input.is_error, latency=input.latency, meta=input.meta, parts=input.parts
    )
    warn(b, INPUT, [input.result], origin="tool", call_id=input.call_id)
    after_call(b)


def permission_decided(b: Builder, input: PermissionDecided) -> None:
    wait = b.run.waiting.get(input.call_id)
    b.require(isinstance(wait, PermissionWait), f"no open permission request {input.call_id!r}")
    assert isinstance(wait, PermissionWait)
    b.require(input.scope in APPROVAL_SCOPES, f"scope must be {', '.join(APPROVAL_SCOPES)}")
    # Exactly the rules that the request offered to add, as every client was shown them
    # (session_any: its wider offer, where it made one); a request that offered none can
    # only be approved once.
    offered = wait.session_rules_any if input.scope == SESSION_ANY and wait.session_rules_any else wait.session_rules
    rules = list(offered) if input.approve and input.scope != "once" else []
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
        if not changes(b.run, wait.name):
            b.effects.append(RunTool(b.run.id, input.call_id, wait.name, wait.input, wait.outside))
        return
    who = input.client or "a person"
    because = f": {input.reason}" if input.reason else ""
    b.finish_call(input.call_id, f"denied by {who}{because}", is_error=True, meta={"denied": True})
    after_call(b)


def human_answered(b: Builder, input: HumanAnswered) -> None:
    wait = b.run.waiting.get(input.call_id)
    b.require(isinstance(wait, HumanWait), f"no open question {input.call_id!r}")
    b.emit(ev.HUMAN_ANSWERED, call_id=input.call_id, answer=input.answer, client=input.client)
    b.finish_call(input.call_id, input.answer, is_error=False)
    after_call(b)


def steer(b: Builder, input: Steer) -> None:
    b.require(bool(input.text.strip()), "steering text is empty")
    tripwire = tripped(b.run.settings.guardrails, INPUT, [input.text])
    if tripwire is not None:
        b.stop("guardrail", tripwire, f"not run: {tripwire}")
        return
    b.emit(ev.STEER_QUEUED, text=input.text, **({"parts": [dict(p) for p in input.parts]} if input.parts else {}))
    warn(b, INPUT, [input.text], origin="steer")
