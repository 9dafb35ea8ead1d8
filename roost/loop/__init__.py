"""The agent loop as a pure state machine (sans-IO, like h11).

:func:`step` takes a session's state and an input (something that happened) and returns a
:class:`Transition`: the events to store and publish, and the effects for the conductor to
perform. :func:`fold` rebuilds a session's state from its events. Nothing here does IO,
reads a clock or makes ids: those arrive as fields of the inputs.
"""

from ._guardrails import SECRET_PATTERNS, Guardrail, secrets_guardrails
from ._patterns import glob_matcher
from ._plan import parse_plan
from ._commands import WILD, Command, Judgement, judge
from ._permissions import ASK_HUMAN, Decision, Policy, Rule, RuleError, decide, parse_rule, paths_named
from ._context import cut_point, estimate, visible
from ._effects import CallModel, CancelRun, Effect, FinishRun, RunCheck, RunTool, StartClock, StartSubagent, Summarize
from ._events import EVENT_TYPES, LIVE_TYPES, REASONING_DELTA, TEXT_DELTA, TOOL_PROGRESS, Event, safe_text
from ._inputs import (
    Abort,
    CheckFinished,
    Compact,
    CreateSession,
    HumanAnswered,
    Input,
    Interrupted,
    ModelFailed,
    ModelFinished,
    PermissionDecided,
    RunFailed,
    Steer,
    Submit,
    Summarized,
    TimeUp,
    ToolFinished,
)
from ._state import Phase, RunState, SessionState, apply, cost, fold
from ._snapshot import SNAPSHOT_FORMAT, SNAPSHOTS_WORK, NotSnapshottable, restore, snapshot
from ._step import PHASE_INPUTS, InvalidInput, Transition, step

__all__ = [
    "ASK_HUMAN",
    "Abort",
    "CallModel",
    "CancelRun",
    "CheckFinished",
    "Command",
    "Compact",
    "CreateSession",
    "Decision",
    "EVENT_TYPES",
    "Effect",
    "Event",
    "FinishRun",
    "Guardrail",
    "HumanAnswered",
    "Input",
    "Interrupted",
    "InvalidInput",
    "Judgement",
    "LIVE_TYPES",
    "ModelFailed",
    "ModelFinished",
    "NotSnapshottable",
    "PHASE_INPUTS",
    "PermissionDecided",
    "Phase",
    "Policy",
    "REASONING_DELTA",
    "Rule",
    "RuleError",
    "RunCheck",
    "RunFailed",
    "RunState",
    "RunTool",
    "SECRET_PATTERNS",
    "SNAPSHOTS_WORK",
    "SNAPSHOT_FORMAT",
    "SessionState",
    "StartClock",
    "StartSubagent",
    "Steer",
    "Submit",
    "Summarize",
    "Summarized",
    "TEXT_DELTA",
    "TOOL_PROGRESS",
    "TimeUp",
    "ToolFinished",
    "Transition",
    "WILD",
    "apply",
    "cost",
    "cut_point",
    "decide",
    "estimate",
    "fold",
    "glob_matcher",
    "judge",
    "parse_plan",
    "parse_rule",
    "paths_named",
    "restore",
    "safe_text",
    "secrets_guardrails",
    "snapshot",
    "step",
    "visible",
]
