"""A small synchronous driver for roost.loop (like h11's tests/helpers.py).

:class:`Driver` feeds inputs to :func:`roost.loop.step`, keeps the event log, and after every
step checks what must always hold: the transition's state is the fold of its events onto the
old state, events carry no ``seq`` and the input's ``ts``, and the history stays well formed.
:meth:`Driver.reject` feeds an illegal input and checks the state did not change.

:func:`legal_input` draws (for hypothesis) an input that the current phase allows.
"""

from __future__ import annotations

import copy
from dataclasses import fields
from typing import Any, Mapping, Sequence

import pytest
from hypothesis import strategies as st

from roost.loop import (
    Abort,
    CallModel,
    CreateSession,
    Event,
    HumanAnswered,
    HumanWait,
    Input,
    Interrupted,
    InvalidInput,
    ModelFailed,
    ModelFinished,
    PermissionDecided,
    Phase,
    Policy,
    RunSettings,
    SessionState,
    Steer,
    StopHooksFinished,
    Submit,
    ToolFinished,
    Transition,
    fold,
    step,
    visible,
)

SESSION = "s1"
MODEL = "scripted/demo"
#: The tools a run gets unless a test says otherwise: the built-ins, and one MCP tool.
TOOLS = ("read", "write", "edit", "glob", "grep", "bash", "ask_human", "skill", "remember", "time__now")
#: The tools of TOOLS whose calls only read (they run side by side).
READ_ONLY = ("read", "glob", "grep", "skill")
#: What Driver.submit takes as the run's settings (the rest are the Submit's own fields).
SETTINGS = frozenset(f.name for f in fields(RunSettings))


def text(s: str) -> dict[str, Any]:
    """A text content block."""
    return {"type": "text", "text": s}


def tool_use(call_id: str, name: str = "read", input: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A tool_use content block."""
    return {"type": "tool_use", "id": call_id, "name": name, "input": dict(input or {})}


def types(t: Transition) -> list[str]:
    """The event types of a transition, in order."""
    return [e.type for e in t.events]


def only(t: Transition, type: str) -> Event:
    """The one event of ``type`` in a transition."""
    found = [e for e in t.events if e.type == type]
    assert len(found) == 1, f"expected one {type}, got {types(t)}"
    return found[0]


def calls(t: Transition) -> list[CallModel]:
    return [e for e in t.effects if isinstance(e, CallModel)]


def check_history(messages: Sequence[Mapping[str, Any]], *, complete: bool) -> None:
    """Roles alternate (user first); every tool_use id has exactly one tool_result in the next
    user message, and a user message answers only the reply before it, results first.

    ``complete=False`` allows the last assistant message's calls to be still unanswered (phase
    TOOLS), as long as the answers so far belong to it.
    """
    for i, message in enumerate(messages):
        assert message["role"] == ("user" if i % 2 == 0 else "assistant"), messages
        assert message["content"], f"empty message {i}"
    for i, message in enumerate(messages):
        blocks = message["content"]
        if message["role"] == "assistant":
            ids = [b["id"] for b in blocks if b.get("type") == "tool_use"]
            assert len(ids) == len(set(ids)), f"duplicate tool_use ids in message {i}"
            answer = messages[i + 1]["content"] if i + 1 < len(messages) else []
            results = [b["tool_use_id"] for b in answer if b.get("type") == "tool_result"]
            still_open = not complete and i >= len(messages) - 2
            if not still_open:
                assert sorted(results) == sorted(ids), f"message {i}: calls {ids}, results {results}"
        else:
            results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
            asked = (
                [b["id"] for b in messages[i - 1]["content"] if b.get("type") == "tool_use"]
                if i > 0
                else []
            )
            assert len(results) == len(set(results)), f"message {i}: a call answered twice"
            assert set(results) <= set(asked), f"message {i}: results {results} for calls {asked}"
            kinds = [b.get("type") for b in blocks]
            n = len(results)
            assert kinds[:n] == ["tool_result"] * n, f"message {i}: tool results must come first"


class Driver:
    """One session, fed inputs one at a time, with a clock that only moves when told."""

    def __init__(self, session: str = SESSION, cwd: str = "/project", ts: float = 1000.0) -> None:
        self.state = SessionState(session)
        self.log: list[Event] = []
        self.now = ts
        self.runs = 0
        self.calls = 0
        self.feed(CreateSession(session, cwd, self.now))

    # -- the clock ------------------------------------------------------------------------

    def tick(self, dt: float = 1.0) -> float:
        self.now += dt
        return self.now

    # -- feeding --------------------------------------------------------------------------

    def feed(self, input: Input) -> Transition:
        """Step ``input``, check the invariants, keep the events."""
        before = self.state
        t = step(before, input)
        assert t.state == fold(t.events, before)
        for event in t.events:
            assert event.seq is None
            assert event.ts == input.ts
            assert event.session == before.id
            assert not event.live
        phase = t.state.phase
        check_history(t.state.messages, complete=phase is not Phase.TOOLS)
        for effect in t.effects:
            if isinstance(effect, CallModel):
                # What the model is sent ends with the user's turn, every call answered; or
                # with the reply the provider paused, which it carries on.
                check_history(effect.messages, complete=True)
                paused = isinstance(input, ModelFinished) and input.stop_reason == "pause_turn"
                assert effect.messages[-1]["role"] == ("assistant" if paused else "user")
                assert effect.messages == visible(t.state.messages, t.state.compacted_upto)
        self.log.extend(t.events)
        self.state = t.state
        return t

    def reject(self, input: Input) -> InvalidInput:
        """Step an illegal input: InvalidInput, and the state is as it was."""
        snapshot = copy.deepcopy(self.state)
        before = self.state
        with pytest.raises(InvalidInput) as info:
            step(self.state, input)
        assert self.state is before
        assert self.state == snapshot
        assert info.value.input is input
        assert info.value.phase is snapshot.phase
        return info.value

    def stored(self) -> list[Event]:
        """The log as the store would hold it: numbered from 1."""
        return [e.numbered(i) for i, e in enumerate(self.log, start=1)]

    # -- conveniences (each advances the clock by one second) -----------------------------

    def submit(self, task: str = "do the thing", **kw: Any) -> Transition:
        """Submit ``task``; ``kw`` holds the Submit's own fields and the run's settings."""
        self.runs += 1
        kw.setdefault("run", f"r{self.runs}")
        kw.setdefault("model", MODEL)
        # Approvals are tested on their own; elsewhere every call just runs.
        kw.setdefault("policy", Policy(yes=True))
        kw.setdefault("tools", TOOLS)
        # As the daemon says of its built-ins: these only read.
        kw.setdefault("read_only", READ_ONLY)
        settings = RunSettings(**{k: kw.pop(k) for k in list(kw) if k in SETTINGS})
        return self.feed(Submit(task=task, ts=self.tick(), settings=settings, **kw))

    def reply(
        self,
        *blocks: Mapping[str, Any],
        stop_reason: str | None = None,
        usage: Mapping[str, int] | None = None,
        latency: float = 0.5,
    ) -> Transition:
        if stop_reason is None:
            stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        return self.feed(
            ModelFinished(tuple(blocks), stop_reason, self.tick(), dict(usage or {}), latency)
        )

    def use_tools(self, *names: str) -> Transition:
        """A reply asking for one call per name, with fresh ids."""
        blocks = []
        for name in names:
            self.calls += 1
            blocks.append(tool_use(f"c{self.calls}", name, {"path": f"f{self.calls}"}))
        return self.reply(*blocks)

    def finish_tool(self, call_id: str, result: str = "ok", **kw: Any) -> Transition:
        return self.feed(ToolFinished(call_id, result, self.tick(), **kw))

    def approve(self, call_id: str, **kw: Any) -> Transition:
        return self.feed(PermissionDecided(call_id, True, self.tick(), **kw))

    def deny(self, call_id: str, **kw: Any) -> Transition:
        return self.feed(PermissionDecided(call_id, False, self.tick(), **kw))

    def answer(self, call_id: str, answer: str, **kw: Any) -> Transition:
        return self.feed(HumanAnswered(call_id, answer, self.tick(), **kw))

    def finish_all_tools(self) -> Transition:
        t = None
        for call_id in self.state.run.pending if self.state.run else ():
            t = self.finish_tool(call_id, f"result of {call_id}")
        assert t is not None, "no pending tool calls"
        return t

    def fail(self, message: str = "overloaded") -> Transition:
        return self.feed(ModelFailed(message, self.tick()))

    def steer(self, s: str, **kw: Any) -> Transition:
        return self.feed(Steer(s, self.tick(), **kw))

    def abort(self, **kw: Any) -> Transition:
        return self.feed(Abort(self.tick(), **kw))

    def interrupted(self) -> Transition:
        return self.feed(Interrupted(self.tick()))


# -- hypothesis: a legal input for the current phase ----------------------------------------

_words = st.sampled_from(["go", "fix it", "read the file", "stop", "é ✓", "  spaced  "])
_usage = st.fixed_dictionaries(
    {"input_tokens": st.integers(0, 500), "output_tokens": st.integers(0, 500)}
)
# Mostly work (a reply, a tool result), sometimes the run is steered, stopped or fails.
_kinds = {
    Phase.MODEL: st.sampled_from(["work"] * 6 + ["steer", "abort", "stop", "interrupted", "fail"]),
    Phase.TOOLS: st.sampled_from(["work"] * 6 + ["steer", "abort", "stop", "interrupted"]),
    Phase.STOP: st.sampled_from(["work"] * 3 + ["steer", "abort", "stop", "interrupted"]),
}
_max_turns = st.integers(1, 4)
_tools = st.sampled_from([(), ("read",), ("read", "bash")])
_n_calls = st.integers(0, 3)
_tool_name = st.sampled_from(["read", "bash", "ask_human"])
_mode = st.sampled_from(["agent", "full"])
_stop_reason = st.sampled_from(["end_turn", "tool_use", "max_tokens"])


@st.composite
def legal_input(draw: st.DrawFn, state: SessionState, ts: float, serial: int) -> Input:
    """An input that ``state``'s phase allows, stamped ``ts``.

    ``serial`` makes run and call ids fresh (the daemon's job in real life).
    """
    phase = state.phase
    if phase is Phase.IDLE:
        settings = RunSettings(
            MODEL, max_turns=draw(_max_turns), mode=draw(_mode), tools=draw(_tools), stop_hooks=draw(st.booleans())
        )
        return Submit(
            run=f"r{serial}",
            task=draw(_words),
            ts=ts,
            settings=settings,
            request_id=f"req{serial}" if draw(st.booleans()) else None,
            context=tuple(draw(st.lists(_words, max_size=2))),
        )
    kind = draw(_kinds[phase])
    if kind == "steer":
        return Steer(draw(_words), ts)
    if kind == "abort":
        return Abort(ts)
    if kind == "stop":
        return Abort(ts, after_step=True)
    if kind == "interrupted":
        return Interrupted(ts)
    if kind == "fail":
        return ModelFailed("provider said no", ts)
    if phase is Phase.STOP:
        # The hooks let the run end, or make it go on (with a reason).
        return StopHooksFinished(ts, draw(st.sampled_from([None, "tests fail: go on"])))
    if phase is Phase.TOOLS:
        assert state.run is not None
        call_id = draw(st.sampled_from(state.run.pending))
        wait = state.run.waiting.get(call_id)
        if wait is None:
            return ToolFinished(call_id, draw(_words), ts, is_error=draw(st.booleans()))
        if isinstance(wait, HumanWait):
            return HumanAnswered(call_id, draw(_words), ts, client="cli#1")
        scope = draw(st.sampled_from(["once", "session"]))
        return PermissionDecided(call_id, draw(st.booleans()), ts, scope=scope, client="cli#1")
    blocks: list[dict[str, Any]] = []
    if draw(st.booleans()):
        blocks.append(text(draw(_words)))
    for i in range(draw(_n_calls)):
        name = draw(_tool_name)
        input = {"question": draw(_words)} if name == "ask_human" else {"command": "ls"} if name == "bash" else {}
        blocks.append(tool_use(f"c{serial}.{i}", name, input))
    if not blocks:
        blocks.append(text(""))
    return ModelFinished(tuple(blocks), draw(_stop_reason), ts, draw(_usage), latency=0.25)
