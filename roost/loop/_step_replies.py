"""A model's reply and its calls: the reply stored (or, malformed, taken as a failure); the
run ended before its calls when it was cut off, trips an output guardrail or is stuck; each
call decided by the permission policy and run, refused, asked about, or started as a
sub-agent (``task`` and the agent tools) or a question (``ask_human``); plan mode's one
reply read as steps. A failed model call (or summary) ends here too."""

from __future__ import annotations

from typing import Any, Mapping

from . import _events as ev
from ._effects import RunTool, StartClock, StartSubagent
from ._guardrails import OUTPUT, reply_texts, tripped
from ._inputs import HookVerdict, ModelFailed, ModelFinished
from ._modes import COMPACT_MODE, Mode
from ._permission_rules import ALLOW, ASK, DENY
from ._permissions import ASK_HUMAN, Decision, decide
from ._plan import parse_plan
from ._state import Phase, RunState
from ._step_builder import Builder, changes, warn
from ._step_endings import STOPPING
from ._step_turns import STUCK_STOP, after_call, continue_or_finish, finish_step


#: The tool that delegates to one of the folder's agents (Claude Code's Task): a call runs
#: the agent it names as a sub-agent.
TASK = "task"

#: The stop reason of a reply the provider paused mid-turn, to be continued.
PAUSE_TURN = "pause_turn"

#: How deep sub-agents nest: a run of this depth runs no sub-agent (a session's run is
#: depth 0, its sub-agent 1).
SUBAGENT_DEPTH = 3


def model_finished(b: Builder, input: ModelFinished) -> None:
    problem = _malformed(input.content)
    if problem is not None:
        # Stored, such a reply would poison the history of every later call.
        model_failed(b, ModelFailed(f"the model's reply was malformed: {problem}", input.ts))
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
    if input.stop_reason == PAUSE_TURN and not calls:
        # The provider paused a long turn of its own tools (web searches): the reply goes
        # back as it is, and the model carries on from it.
        finish_step(b)
        continue_or_finish(b, after_tools=True)
        return
    stop = None if b.run.settings.mode == Mode.PLAN else _stop_before_calls(b, input.stop_reason, content)
    if b.run.settings.mode != Mode.PLAN and (stop is None or stop[0] != "guardrail"):
        warn(b, OUTPUT, reply_texts(content), origin="reply")
    # What is decided and run: the input as the hooks left it.
    inputs = {c["id"]: _hooked(input.hooks.get(c["id"]), c.get("input", {})) for c in calls}
    decisions = {}
    if b.run.settings.mode != Mode.PLAN and stop is None:
        decisions = {c["id"]: _decision(b, c["name"], inputs[c["id"]], input.resolved, input.hooks.get(c["id"])) for c in calls}
    blocked = {i: v.reason for i, v in input.hooks.items() if v.decision == DENY and _refusable(decisions.get(i))}
    # A call that waits for approval has not started: its request stands where its start
    # would, and it starts once approved.
    asks = {c["id"] for c in calls if _asks(b.run, decisions.get(c["id"])) and c["id"] not in blocked}
    for call in calls:
        decision = decisions.get(call["id"])
        if call["id"] in asks:
            assert decision is not None
            _ask(b, call["id"], call["name"], inputs[call["id"]], decision, input.diffs.get(call["id"]))
        else:
            allowed = decision if decision is not None and decision.action == ALLOW and call["id"] not in blocked else None
            b.start_tool(call["id"], call["name"], inputs[call["id"]], allowed is not None, bool(allowed and allowed.outside))
    if b.run.settings.mode == Mode.PLAN:
        # One call, no tools: whatever the model asked for is answered, never run.
        for call in calls:
            b.finish_call(call["id"], "not run: plan mode runs no tools", is_error=True)
        finish_step(b)
        b.emit(ev.PLAN, steps=parse_plan(b.run.text), text=b.run.text)
        b.emit_run_finished("done" if input.stop_reason != "max_tokens" else "max_tokens")
        return
    if stop is not None:
        reason, why, note = stop
        for call in calls:
            b.finish_call(call["id"], note, is_error=True)
        finish_step(b)
        if reason == "max_tokens":
            b.emit_run_finished(reason)
        else:
            b.emit_run_finished(reason, why, text=why)
        return
    if calls:
        for call in calls:
            if call["id"] in blocked:
                # A hook refused it (before the rules and people, as Claude Code's do).
                b.finish_call(call["id"], f"blocked by a hook: {blocked[call['id']]}", is_error=True, meta={"blocked": True})
                after_call(b)
            elif call["id"] not in asks:
                _start_call(b, call["id"], call["name"], inputs[call["id"]], decisions[call["id"]])
        return
    finish_step(b)
    if input.stop_reason == "refusal":
        # Not a finished task: scripts must be able to tell (the exit status says error).
        b.emit_run_finished("error", "the model declined to go on (stop reason: refusal)")
        return
    continue_or_finish(b, after_tools=False)


def _stop_before_calls(b: Builder, stop_reason: str, content: list[dict[str, Any]]) -> tuple[str, str, str] | None:
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


def _decision(
    b: Builder, name: str, input: Mapping[str, Any], resolved: Mapping[str, str], verdict: HookVerdict | None
) -> Decision | None:
    """What the permission policy says of a call (None: a call it does not judge: a tool the
    run lacks, a question, a sub-agent), with what the hooks said of it: their ``allow``
    approves what would ask (see :func:`decide`), their ``ask`` asks a person, in every
    mode, what would run."""
    run = b.run
    if name not in run.settings.tools or name == ASK_HUMAN or name in run.settings.subagents:
        return None
    approved = verdict is not None and verdict.decision == ALLOW
    policy, mode = run.settings.policy, run.settings.mode
    decision = decide(policy, mode, b.state.allowed, name, input, b.state.cwd, resolved, approved)
    if verdict is not None and verdict.decision == ASK and decision.action != DENY:
        # What approving for the session adds is what the rules offered: the hook asks
        # again next time all the same.
        return Decision(
            ASK, f"a hook asks: {verdict.reason or 'no reason given'}", decision.session_rules,
            decision.session_rules_any, decision.outside,
        )
    return decision


def _hooked(verdict: HookVerdict | None, input: Mapping[str, Any]) -> Mapping[str, Any]:
    """A call's input as the hooks left it."""
    return verdict.input if verdict is not None and verdict.input is not None else input


def _refusable(decision: Decision | None) -> bool:
    """Whether a hook's refusal of a call so decided is what the model is told: for a call
    the rules judge and do not refuse themselves."""
    return decision is not None and decision.action != DENY


def _asks(run: RunState, decision: Decision | None) -> bool:
    """Whether a call so decided waits for a person's approval (not in a run that stops
    after this step: nobody is asked any more)."""
    return decision is not None and decision.action == ASK and run.stopping is None


def _ask(b: Builder, call_id: str, name: str, input: Mapping[str, Any], decision: Decision, diff: str | None) -> None:
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
        **({"session_rules_any": list(decision.session_rules_any)} if decision.session_rules_any else {}),
        outside=decision.outside,
        **({"diff": diff} if diff else {}),
        **({"deadline": deadline} if deadline is not None else {}),
    )
    if deadline is not None:
        b.effects.append(StartClock(run.id, deadline, call_id))


def _start_call(b: Builder, call_id: str, name: str, input: Mapping[str, Any], decision: Decision | None) -> None:
    """A started call of the reply: run it, refuse it, or ask its question. A call that
    changes things runs when it is the first pending one (see ``release_head``)."""
    run = b.run
    if run.stopping is not None and (name == ASK_HUMAN or (decision is not None and decision.action == ASK)):
        # The run ends after this step: nobody is asked any more.
        b.finish_call(call_id, f"not run: {STOPPING}", is_error=True)
        after_call(b)
        return
    if name not in run.settings.tools:
        # The agent's tool list holds in every mode: such a call is never run nor asked about.
        b.finish_call(call_id, f"the {run.settings.agent} agent has no tool {name}", is_error=True, meta={"no_tool": True})
        after_call(b)
        return
    if name == ASK_HUMAN:
        problem = _question_problem(input)
        if problem is not None:
            b.finish_call(call_id, f"invalid input for ask_human: {problem}", is_error=True)
            after_call(b)
        else:
            b.emit(ev.HUMAN_ASKED, call_id=call_id, question=input["question"], choices=list(input.get("choices", ())))
        return
    if name in run.settings.subagents:
        # Delegation itself is not a risk: the sub-agent's own calls are decided one by one.
        target = _task_target(input, run.settings.delegates) if name == TASK else _agent_target(name, input)
        if isinstance(target, str):
            b.finish_call(call_id, f"invalid input for {name}: {target}", is_error=True)
            after_call(b)
        elif run.settings.depth >= SUBAGENT_DEPTH:
            b.finish_call(call_id, f"sub-agents nest at most {SUBAGENT_DEPTH} deep; do this part yourself", is_error=True)
            after_call(b)
        else:
            b.effects.append(StartSubagent(run.id, call_id, *target))
        return
    assert decision is not None
    if decision.action == DENY:
        b.finish_call(call_id, f"permission denied: {decision.reason}", is_error=True, meta={"denied": True})
        after_call(b)
    else:
        assert decision.action == ALLOW
        if not changes(run, name):
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


def model_failed(b: Builder, input: ModelFailed) -> None:
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
    finish_step(b)
    b.emit_run_finished("error", input.message)
