"""The agent loop as a pure state machine (sans-IO, like h11).

:func:`step` takes a session's state and an input (something that happened) and returns a
:class:`Transition`: the events to store and publish, and the effects for the conductor to
perform. :func:`fold` rebuilds a session's state from its events. Nothing here does IO,
reads a clock or makes ids: those arrive as fields of the inputs.
"""

from ._guardrails import GUARDRAIL_ACTIONS, SECRET_PATTERNS, Guardrail, secrets_guardrails
from ._patterns import glob_matcher
from ._regex import PatternError, Regex, linear_regex
from ._plan import parse_plan
from ._shell_lines import Command, Judgement, escape, judge
from ._shell_words import WILD
from ._permission_rules import CLAUDE_TOOL_NAMES, WEB_FETCH, Rule, RuleError, parse_rule
from ._permission_paths import USER_CONFIGURATION, USER_TOOLCHAINS
from ._permissions import ASK_HUMAN, TODO, Decision, Policy, call_matches, decide, paths_named
from ._urls import UrlError, WebAddress, web_address
from ._context import cut_point, estimate, visible
from ._effects import (
    CallModel,
    CancelRun,
    Effect,
    FinishRun,
    RunCheck,
    RunStopHooks,
    RunTool,
    StartClock,
    StartSubagent,
    Summarize,
)
from ._events import EVENT_TYPES, LIVE_TYPES, REASONING_DELTA, TEXT_DELTA, TOOL_PROGRESS, Event, safe_text
from ._inputs import (
    APPROVAL_SCOPES,
    Abort,
    CheckFinished,
    Compact,
    CreateSession,
    HumanAnswered,
    Input,
    HookVerdict,
    Interrupted,
    ModelFailed,
    ModelFinished,
    PermissionDecided,
    RunFailed,
    Steer,
    StopHooksFinished,
    Submit,
    Summarized,
    TimeUp,
    ToolFinished,
)
from ._report import run_report
from ._modes import NO_TOOLS_MODES, Mode
from ._settings import EXEC_ATTEMPTS, EXEC_TIME_BOX, MAX_TURNS, MODE, RunSettings
from ._state import Phase, RunState, SessionState, apply, cost, fold
from ._waits import HumanWait, PermissionWait, Wait
from ._fork import fork_point, unanswered, whole
from ._snapshot import SNAPSHOT_FORMAT, SNAPSHOTS_WORK, NotSnapshottable, restore, snapshot
from ._step import PHASE_INPUTS, Transition, step
from ._step_builder import InvalidInput
from ._step_replies import TASK

__all__ = [
    "APPROVAL_SCOPES",
    "ASK_HUMAN",
    "Abort",
    "CLAUDE_TOOL_NAMES",
    "CallModel",
    "CancelRun",
    "CheckFinished",
    "Command",
    "Compact",
    "CreateSession",
    "Decision",
    "EVENT_TYPES",
    "EXEC_ATTEMPTS",
    "EXEC_TIME_BOX",
    "Effect",
    "Event",
    "FinishRun",
    "GUARDRAIL_ACTIONS",
    "Guardrail",
    "HookVerdict",
    "HumanAnswered",
    "HumanWait",
    "Input",
    "Interrupted",
    "InvalidInput",
    "Judgement",
    "LIVE_TYPES",
    "MAX_TURNS",
    "MODE",
    "Mode",
    "ModelFailed",
    "ModelFinished",
    "NO_TOOLS_MODES",
    "NotSnapshottable",
    "PHASE_INPUTS",
    "PatternError",
    "PermissionDecided",
    "PermissionWait",
    "Phase",
    "Policy",
    "REASONING_DELTA",
    "Regex",
    "Rule",
    "RuleError",
    "RunCheck",
    "RunFailed",
    "RunSettings",
    "RunState",
    "RunStopHooks",
    "RunTool",
    "SECRET_PATTERNS",
    "SNAPSHOTS_WORK",
    "SNAPSHOT_FORMAT",
    "SessionState",
    "StartClock",
    "StartSubagent",
    "Steer",
    "StopHooksFinished",
    "Submit",
    "Summarize",
    "Summarized",
    "TASK",
    "TEXT_DELTA",
    "TODO",
    "TOOL_PROGRESS",
    "TimeUp",
    "ToolFinished",
    "Transition",
    "USER_CONFIGURATION",
    "USER_TOOLCHAINS",
    "UrlError",
    "WEB_FETCH",
    "WILD",
    "Wait",
    "WebAddress",
    "apply",
    "call_matches",
    "cost",
    "cut_point",
    "decide",
    "escape",
    "estimate",
    "fold",
    "fork_point",
    "glob_matcher",
    "judge",
    "linear_regex",
    "parse_plan",
    "parse_rule",
    "paths_named",
    "restore",
    "run_report",
    "safe_text",
    "secrets_guardrails",
    "snapshot",
    "step",
    "unanswered",
    "visible",
    "web_address",
    "whole",
]
