"""Effects: what the conductor must do after a step. The loop performs none of them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Union


@dataclass(frozen=True, slots=True)
class CallModel:
    """Stream one model reply for ``messages``; answer with ModelFinished or ModelFailed."""

    run: str
    step: int
    model: str
    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[str, ...]
    #: The session's summary after a compaction (a layer of the system prompt), or "".
    summary: str = ""


@dataclass(frozen=True, slots=True)
class Summarize:
    """Have the model summarize ``messages`` (the history before the cut, as the model sees
    it, after the ``previous`` summary); answer with Summarized or ModelFailed."""

    run: str
    model: str
    messages: tuple[Mapping[str, Any], ...]
    previous: str = ""
    #: The person's instructions for this summary (``roost compact --instructions``), or "".
    instructions: str = ""


@dataclass(frozen=True, slots=True)
class RunTool:
    """Run one tool call; answer with ToolFinished. Calls of one step may run concurrently."""

    run: str
    call_id: str
    name: str
    input: Mapping[str, Any]
    #: The call was allowed to touch a path outside the working directory.
    outside: bool = False


@dataclass(frozen=True, slots=True)
class StartSubagent:
    """Run the agent ``name`` on ``message`` as a sub-agent of this call; answer with the
    call's ToolFinished (its final text) when its run ends."""

    run: str
    call_id: str
    name: str
    message: str


@dataclass(frozen=True, slots=True)
class RunCheck:
    """Run the exec-mode check command; answer with CheckFinished."""

    run: str
    attempt: int
    command: str


@dataclass(frozen=True, slots=True)
class StartClock:
    """At ``deadline`` (wall-clock seconds), unless the run has ended: feed TimeUp (with
    ``call_id``, the approval clock of that call's permission request)."""

    run: str
    deadline: float
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class RunStopHooks:
    """The model ended its turn: run the Stop hooks; answer with StopHooksFinished."""

    run: str
    #: A Stop hook already made this run go on (Claude Code's ``stop_hook_active``).
    active: bool
    #: The text of the reply that ended the turn.
    text: str = ""


@dataclass(frozen=True, slots=True)
class CancelRun:
    """Stop every model stream and tool process of the run at once."""

    run: str


@dataclass(frozen=True, slots=True)
class FinishRun:
    """The run has ended: release the session for the next run."""

    run: str
    reason: str


Effect = Union[
    CallModel, Summarize, RunTool, StartSubagent, RunCheck, StartClock, RunStopHooks, CancelRun, FinishRun
]
