"""A session's first event, and a run's start: ``run.started`` with its settings as
recorded, the tools that changed since the session's last run, the task (and what the
UserPromptSubmit hooks added) through the input guardrails, exec mode's time box, and the
first model call."""

from __future__ import annotations

from . import _events as ev
from ._effects import StartClock
from ._guardrails import INPUT, tripped
from ._inputs import CreateSession, Submit
from ._modes import NO_TOOLS_MODES, Mode
from ._step_builder import Builder, warn, withheld


def create_session(b: Builder, input: CreateSession) -> None:
    b.require(b.state.events == 0, "the session already exists")
    b.emit(ev.SESSION_CREATED, cwd=input.cwd)


def submit(b: Builder, input: Submit) -> None:
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
        b.emit(ev.MESSAGE_USER, text=withheld(tripwire), origin="task", **typed)
        b.emit_run_finished("guardrail", tripwire, text=tripwire)
        return
    if exec_:
        b.effects.append(StartClock(input.run, input.ts + settings.time_box))
    parts = {"parts": [dict(p) for p in input.parts]} if input.parts else {}
    b.emit(ev.MESSAGE_USER, text=input.task, origin="task", **typed, **parts)
    warn(b, INPUT, [input.task], origin="task")
    for text in input.context:
        b.emit(ev.MESSAGE_USER, text=text, origin="hook")
        warn(b, INPUT, [text], origin="hook")
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
