"""The agent loop as a pure state machine (sans-IO, like h11).

:func:`step` takes a session's state and an input (something that happened) and returns a
:class:`Transition`: the events to store and publish, and the effects for the conductor to
perform. :func:`fold` rebuilds a session's state from its events. Nothing here does IO,
reads a clock or makes ids: those arrive as fields of the inputs.
"""

from ._effects import CallModel, CancelRun, Effect, FinishRun, RunCheck, RunTool, StartClock
from ._events import EVENT_TYPES, LIVE_TYPES, REASONING_DELTA, STOP_REASONS, TEXT_DELTA, Event
from ._inputs import (
    Abort,
    CheckFinished,
    CreateSession,
    Input,
    Interrupted,
    ModelFailed,
    ModelFinished,
    Steer,
    Submit,
    TimeUp,
    ToolFinished,
)
from ._state import Phase, RunState, SessionState, apply, cost, fold
from ._step import InvalidInput, Transition, step

__all__ = [
    "EVENT_TYPES",
    "LIVE_TYPES",
    "REASONING_DELTA",
    "STOP_REASONS",
    "TEXT_DELTA",
    "Abort",
    "CallModel",
    "CancelRun",
    "CheckFinished",
    "CreateSession",
    "Effect",
    "Event",
    "FinishRun",
    "Input",
    "Interrupted",
    "InvalidInput",
    "ModelFailed",
    "ModelFinished",
    "Phase",
    "RunCheck",
    "RunState",
    "RunTool",
    "SessionState",
    "StartClock",
    "Steer",
    "Submit",
    "TimeUp",
    "ToolFinished",
    "Transition",
    "apply",
    "cost",
    "fold",
    "step",
]
