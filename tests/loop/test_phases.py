"""The state table, pair by pair: every input in every phase. An input the phase does not take
is refused before any rule runs, and nothing changes; one it takes is stepped (given a
call id or request that exists)."""

from __future__ import annotations

from typing import Any, Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from roost.loop import (
    Abort,
    CheckFinished,
    Compact,
    CreateSession,
    HumanAnswered,
    Input,
    Interrupted,
    InvalidInput,
    ModelFailed,
    ModelFinished,
    PHASE_INPUTS,
    PermissionDecided,
    Phase,
    Policy,
    RunFailed,
    RunSettings,
    Steer,
    StopHooksFinished,
    Submit,
    Summarized,
    TimeUp,
    ToolFinished,
    step,
)

from ._driver import MODEL, Driver, text, tool_use
from .test_fold import SETTINGS, sessions

INPUT_TYPES = (
    CreateSession, Submit, Compact, ModelFinished, ModelFailed, ToolFinished, PermissionDecided,
    HumanAnswered, CheckFinished, Summarized, Steer, Abort, Interrupted, TimeUp, RunFailed,
    StopHooksFinished,
)


def _idle() -> Driver:
    return Driver(cwd="/p")


def _model() -> Driver:
    d = Driver(cwd="/p")
    d.submit()
    return d


def _tools() -> Driver:
    # c1 waits for a permission, c2 for a person's answer, c3 runs.
    d = Driver(cwd="/p")
    d.submit(mode="agent", policy=Policy(home="/home/me"))
    d.reply(
        tool_use("c1", "bash", {"command": "make"}),
        tool_use("c2", "ask_human", {"question": "ok?"}),
        tool_use("c3", "read", {"path": "a"}),
    )
    return d


def _check() -> Driver:
    d = Driver(cwd="/p")
    d.submit(mode="exec", check="check.sh", attempts=2, time_box=60.0)
    d.reply(text("done"))
    return d


def _compact() -> Driver:
    d = Driver(cwd="/p")
    d.submit("task", context_window=1000, compact_at=0.5, keep_turns=1)
    d.reply(tool_use("c1", "read", {"path": "a"}), usage={"input_tokens": 100, "output_tokens": 10})
    d.finish_tool("c1", "x" * 400)
    d.reply(tool_use("c2", "read", {"path": "b"}), usage={"input_tokens": 450, "output_tokens": 10})
    d.finish_tool("c2", "y" * 400)
    return d


def _stop() -> Driver:
    d = Driver(cwd="/p")
    d.submit(stop_hooks=True)
    d.reply(text("done"))
    return d


REACH: dict[Phase, Callable[[], Driver]] = {
    Phase.IDLE: _idle, Phase.MODEL: _model, Phase.TOOLS: _tools, Phase.CHECK: _check, Phase.COMPACT: _compact,
    Phase.STOP: _stop,
}


def sample(kind: type, d: Driver) -> Input:
    """An input of ``kind`` that the rules take, where its phase takes it at all."""
    ts = d.tick()
    samples: dict[type, Callable[[], Input]] = {
        CreateSession: lambda: CreateSession("s2", "/q", ts),
        Submit: lambda: Submit("rn", "task", ts, RunSettings(MODEL)),
        Compact: lambda: Compact("rc", ts, MODEL),
        ModelFinished: lambda: ModelFinished(({"type": "text", "text": "hi"},), "end_turn", ts),
        ModelFailed: lambda: ModelFailed("overloaded", ts),
        ToolFinished: lambda: ToolFinished("c3", "ok", ts),
        PermissionDecided: lambda: PermissionDecided("c1", True, ts),
        HumanAnswered: lambda: HumanAnswered("c2", "yes", ts),
        CheckFinished: lambda: CheckFinished(0, "", ts),
        Summarized: lambda: Summarized("short", ts),
        Steer: lambda: Steer("also this", ts),
        Abort: lambda: Abort(ts),
        Interrupted: lambda: Interrupted(ts),
        TimeUp: lambda: TimeUp(ts),
        RunFailed: lambda: RunFailed("the disk is full", ts),
        StopHooksFinished: lambda: StopHooksFinished(ts, "the tests fail: go on"),
    }
    return samples[kind]()


def test_the_table_names_every_phase_and_only_known_inputs():
    assert set(PHASE_INPUTS) == set(Phase)
    assert set().union(*PHASE_INPUTS.values()) == set(INPUT_TYPES)


@pytest.mark.parametrize("phase", list(Phase), ids=lambda p: p.value)
@pytest.mark.parametrize("kind", INPUT_TYPES, ids=lambda k: k.__name__)
def test_every_phase_and_input(phase: Phase, kind: type) -> None:
    d = REACH[phase]()
    assert d.state.phase is phase
    input = sample(kind, d)
    if kind in PHASE_INPUTS[phase]:
        if kind is CreateSession:
            # The one IDLE input a session with events refuses: it exists already.
            assert "already exists" in str(d.reject(input))
            return
        d.feed(input)  # stepped, with every invariant the driver checks
    else:
        error = d.reject(input)  # refused, and the state is as it was
        assert f"phase {phase.value} takes only" in str(error)


@SETTINGS
@given(sessions(), st.sampled_from(INPUT_TYPES), st.data())
def test_no_input_outside_the_table_is_ever_taken(session: Any, kind: type, data: Any) -> None:
    _, steps = session
    state = steps[data.draw(st.integers(0, len(steps) - 1), label="at")][1].state
    d = Driver(cwd="/p")
    input = sample(kind, d)
    try:
        step(state, input)
    except InvalidInput as error:
        assert error.phase is state.phase
        return
    assert kind in PHASE_INPUTS[state.phase]
