"""Claude Code's hooks of events other than a tool call: what they are given and what
their answers mean. They run as every hook runs (see ``_hooks``: ``run_hook``).

- UserPromptSubmit (``prompt``): ``{"decision": "block", "reason"}`` (or exit 2) refuses
  the prompt; ``hookSpecificOutput.additionalContext`` (or plain stdout) is added after it.
- Stop (``stop_hook_active``, ``last_assistant_message``; a sub-agent's SubagentStop,
  matched on the agent's name, also told ``agent_id``, ``agent_type``,
  ``agent_transcript_path``): ``{"decision": "block", "reason"}`` (or exit 2) makes the run
  go on with the reason; ``continue: false`` lets the run end even if another hook blocked.
- SessionStart (before a dispatch's run; ``source`` ``startup`` for a session's first run,
  ``compact`` after ``roost compact``, else ``resume``; and ``model``): what it prints, or
  ``additionalContext``, is context for the model, as UserPromptSubmit's is; it cannot
  block.
- Notification (``permission_prompt`` when a call asks, ``idle_prompt`` when the model asks
  a question; ``message``, ``notification_type``) and PreCompact (``trigger`` ``manual``
  for ``roost compact``, ``auto``; ``custom_instructions``): they are told, and cannot
  block; Notification hooks run off the run's way.
- SessionEnd (``reason``, matched): when a session ends; see ``_session_end``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..folder import _claude as claude
from ..folder._config import Hook
from ._hooks import BLOCK_STATUS, HookEnv, Ran, blocked_by, hook_answer, run_hook, specific_output, stop_reason


@dataclass(frozen=True, slots=True)
class PromptOutcome:
    """What the UserPromptSubmit hooks said: a refusal (its reason), context to add after
    the prompt, and failures."""

    blocked: str | None = None
    context: tuple[str, ...] = ()
    failures: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StopOutcome:
    """What the Stop hooks said: why the run goes on (None: it may end), and failures."""

    reason: str | None = None
    failures: tuple[str, ...] = ()


async def run_prompt_hooks(hooks: tuple[Hook, ...], prompt: str, where: HookEnv) -> PromptOutcome:
    """Run the UserPromptSubmit hooks on a task or steering, before it enters the run; the
    first refusal ends the chain."""
    context: list[str] = []
    failures: list[str] = []
    for hook in hooks:
        if hook.kind != "prompt":
            continue
        ran = await run_hook(hook, where.claude_payload(hook.event or "UserPromptSubmit", prompt=prompt), where)
        if ran.problem is not None:
            failures.append(ran.problem)
            continue
        if ran.status == BLOCK_STATUS:
            return PromptOutcome(ran.stderr or blocked_by(hook), (), tuple(failures))
        answer, _ = hook_answer(hook, ran)
        if answer.get("decision") == "block" or stop_reason(answer) is not None:
            refused = stop_reason(answer) or str(answer.get("reason") or blocked_by(hook))
            return PromptOutcome(refused, (), tuple(failures))
        added = specific_output(answer).get("additionalContext") if answer else ran.stdout
        if isinstance(added, str) and added.strip():
            context.append(added.strip())
    return PromptOutcome(None, tuple(context), tuple(failures))


async def run_start_hooks(hooks: tuple[Hook, ...], source: str, model: str, where: HookEnv) -> PromptOutcome:
    """Run the SessionStart hooks whose matcher matches ``source`` (``startup``, ``resume``,
    ``compact``) before a dispatch's run: what they print (or ``additionalContext``) is
    context for the model; they cannot block (exit 2 is reported, nothing more)."""
    context: list[str] = []
    failures: list[str] = []
    for hook in hooks:
        if hook.kind != "session_start" or not claude.event_matcher(hook.match)(source):
            continue
        ran = await run_hook(hook, where.claude_payload("SessionStart", source=source, model=model), where)
        if ran.problem is None and ran.status == BLOCK_STATUS:
            ran = Ran(ran.status, "", "", f"hook {hook.command!r} exited with status 2: {ran.stderr[-500:]}")
        if ran.problem is not None:
            failures.append(ran.problem)
            continue
        answer, _ = hook_answer(hook, ran)
        added = specific_output(answer).get("additionalContext") if answer else ran.stdout
        if isinstance(added, str) and added.strip():
            context.append(added.strip())
    return PromptOutcome(None, tuple(context), tuple(failures))


def event_hooks(hooks: tuple[Hook, ...], kind: str, word: str) -> list[Hook]:
    """The hooks of ``kind`` whose matcher matches ``word`` (a notification's type, what
    started a compaction)."""
    return [hook for hook in hooks if hook.kind == kind and claude.event_matcher(hook.match)(word)]


async def run_event_hooks(hooks: tuple[Hook, ...], kind: str, word: str, where: HookEnv, **fields: Any) -> tuple[str, ...]:
    """Run the hooks of an event that neither blocks nor adds anything (PreCompact), those
    whose matcher matches ``word``, each given Claude Code's payload with ``fields``: they
    are told, no more (exit 2 is no refusal here); which of them failed."""
    failures = []
    for hook in event_hooks(hooks, kind, word):
        ran = await run_hook(hook, where.claude_payload(hook.event or "", **fields), where)
        if ran.problem is not None:
            failures.append(ran.problem)
    return tuple(failures)


@dataclass(frozen=True, slots=True)
class Subagent:
    """The sub-agent whose run ends, as SubagentStop hooks are told of it."""

    #: The call that runs it (``agent_id``), its agent's name (``agent_type``, what the
    #: matcher matches) and its own transcript.
    id: str
    type: str
    transcript: str


async def run_stop_hooks(
    hooks: tuple[Hook, ...], active: bool, text: str, where: HookEnv, subagent: Subagent | None = None
) -> StopOutcome:
    """Run the Stop hooks when the model ends its turn (a sub-agent's: the SubagentStop
    hooks that match its agent): every one, their reasons to go on joined; one that says
    ``continue: false`` lets the run end whatever the others say."""
    reasons: list[str] = []
    failures: list[str] = []
    ending = False
    for hook in hooks:
        if subagent is not None:
            if hook.kind != "subagent_stop" or not claude.event_matcher(hook.match)(subagent.type):
                continue
            payload = where.claude_payload(
                "SubagentStop",
                stop_hook_active=active,
                agent_id=subagent.id,
                agent_type=subagent.type,
                agent_transcript_path=subagent.transcript,
                last_assistant_message=text,
            )
        elif hook.kind != "stop":
            continue
        else:
            payload = where.claude_payload(hook.event or "Stop", stop_hook_active=active, last_assistant_message=text)
        ran = await run_hook(hook, payload, where)
        if ran.problem is not None:
            failures.append(ran.problem)
            continue
        if ran.status == BLOCK_STATUS:
            reasons.append(ran.stderr or blocked_by(hook))
            continue
        answer, _ = hook_answer(hook, ran)
        ending = ending or stop_reason(answer) is not None
        if answer.get("decision") == "block":
            reasons.append(str(answer.get("reason") or blocked_by(hook)))
    return StopOutcome(None if ending or not reasons else "\n".join(reasons), tuple(failures))
