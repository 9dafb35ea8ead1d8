"""Inputs: things that happened to a session, fed to :func:`roost.loop.step`.

Times and ids come in as fields; the loop reads no clock and makes no ids.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Union

from ._settings import KEEP_TURNS, RunSettings



@dataclass(frozen=True, slots=True)
class CreateSession:
    """A new, empty session in ``cwd``."""

    session: str
    cwd: str
    ts: float


@dataclass(frozen=True, slots=True)
class Submit:
    """A task submitted to an idle session: starts a run with ``settings``."""

    run: str
    task: str
    ts: float
    settings: RunSettings
    request_id: str | None = None
    #: The system prompt's layers: ``{name, chars, source}`` each (recorded, not used).
    prompt: tuple[Mapping[str, Any], ...] = ()
    #: What the folder's untrusted files would have widened, reported as the run starts
    #: (``project.untrusted``'s data; None: nothing was ignored).
    untrusted: Mapping[str, Any] | None = None
    #: What the UserPromptSubmit hooks added to the task: each a user message of origin
    #: ``hook`` after it.
    context: tuple[str, ...] = ()
    #: The texts of the system prompt's layers a project's files wrote (instructions,
    #: memory): input guardrails read them with the task (not recorded).
    instructions: tuple[str, ...] = ()
    #: UserPromptSubmit hooks that failed (reported in ``run.started``; none blocked).
    hook_failures: tuple[str, ...] = ()
    #: The custom command ``task`` was expanded from, as ``run.started`` records it
    #: (``{"name", "arguments", "source", "typed"}``; None: the task was typed as it is).
    command: Mapping[str, Any] | None = None
    #: Media the task carries (images attached to it), as references to what the daemon
    #: stored (see :attr:`ToolFinished.parts`).
    parts: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Compact:
    """Summarize an idle session's older history now (``roost compact``): a short run."""

    run: str
    ts: float
    model: str
    keep_turns: int = KEEP_TURNS
    #: What the person wants the summary to keep or stress (Claude Code's ``/compact
    #: [instructions]``), or "".
    instructions: str = ""


@dataclass(frozen=True, slots=True)
class Summarized:
    """The model's summary for a compaction in flight."""

    summary: str
    ts: float
    usage: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HookVerdict:
    """What the daemon's PreToolUse hooks said of one call, before it is decided: ``allow``
    (approves a call that would ask, unless an ask rule or a protected path asks), ``ask``
    (a person approves it, in every mode), ``deny`` (refused, the model told ``reason``),
    or None (no word on it); and the input they gave it instead (None: as the model wrote
    it), which is decided and run."""

    decision: str | None = None
    reason: str = ""
    input: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class ModelFinished:
    """The model's stream ended with a complete message."""

    content: tuple[Mapping[str, Any], ...]
    stop_reason: str
    ts: float
    usage: Mapping[str, int] = field(default_factory=dict)
    latency: float = 0.0
    #: Where the paths the reply's calls name really lead (symlinks followed), with the
    #: working directory and the home folder: found by the daemon, which can look, so that
    #: the permission rules judge real paths (see :func:`roost.loop.decide`).
    resolved: Mapping[str, str] = field(default_factory=dict)
    #: What edit and write calls would change, as unified diffs by call id (shown with a
    #: permission request; looked at by the daemon, since the loop reads no files).
    diffs: Mapping[str, str] = field(default_factory=dict)
    #: Seconds from the call to the first of the reply's content (None: not known), and the
    #: retries the provider took before the reply came.
    ttft: float | None = None
    retries: int | None = None
    #: What the PreToolUse hooks said of the reply's calls, by call id (they run before the
    #: reply is fed, as Claude Code runs them before its permission check).
    hooks: Mapping[str, HookVerdict] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ModelFailed:
    """The model call failed (after the provider's own retries)."""

    message: str
    ts: float


@dataclass(frozen=True, slots=True)
class ToolFinished:
    """A tool call finished (successfully or not)."""

    call_id: str
    result: str
    ts: float
    is_error: bool = False
    latency: float = 0.0
    meta: Mapping[str, Any] = field(default_factory=dict)
    #: Media the result holds besides its text (``{"type": "image", "media_type", "sha256",
    #: ...}``: references to what the daemon stored, never the bytes).
    parts: tuple[Mapping[str, Any], ...] = ()


#: An approval's scopes: this call only; for the session, the rules the request offered
#: (``session_rules``); for the session, its wider offer (``session_rules_any``: the
#: commands with any arguments; where it made none, as ``session``).
SESSION_ANY = "session_any"
APPROVAL_SCOPES = ("once", "session", SESSION_ANY)


@dataclass(frozen=True, slots=True)
class PermissionDecided:
    """A person (or the approval timeout) answered a permission request."""

    call_id: str
    approve: bool
    ts: float
    #: One of :data:`APPROVAL_SCOPES`: ``once``, or ``session`` / ``session_any``: also allow such
    #: calls for the rest of the session.
    scope: str = "once"
    #: Why it was denied; the model sees it.
    reason: str = ""
    #: Who answered (the client's name), for every watcher to see.
    client: str = ""


@dataclass(frozen=True, slots=True)
class HumanAnswered:
    """A person answered an ``ask_human`` question."""

    call_id: str
    answer: str
    ts: float
    client: str = ""


@dataclass(frozen=True, slots=True)
class Steer:
    """More words for the run in flight; the next model call sees them."""

    text: str
    ts: float
    #: Media sent with them (see :attr:`ToolFinished.parts`).
    parts: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Abort:
    """Stop the run in flight now; or, ``after_step``, once the step in flight is done."""

    ts: float
    reason: str = "aborted by the user"
    #: What the model had streamed of the reply being cut off (text blocks), if any.
    partial: tuple[Mapping[str, Any], ...] = ()
    #: Let the model's reply and its tool calls finish (their results stored), then end.
    after_step: bool = False


@dataclass(frozen=True, slots=True)
class CheckFinished:
    """The exec-mode check command ended."""

    exit_status: int
    output: str
    ts: float
    duration: float = 0.0


@dataclass(frozen=True, slots=True)
class TimeUp:
    """A clock of the run ran out: its time box, or (``call_id``) the approval timeout of
    that call's permission request."""

    ts: float
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Interrupted:
    """The daemon found a run in flight that an earlier daemon never finished."""

    ts: float
    #: Calls of the run whose sub-agents go on (a person may still answer them): they are
    #: not answered as interrupted.
    resumed: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class StopHooksFinished:
    """The run's Stop hooks answered. A ``reason`` makes the run go on: it is the next
    user message; None lets the run end."""

    ts: float
    reason: str | None = None
    #: Hooks that failed (each reported, none blocking).
    failures: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RunFailed:
    """The daemon cannot carry the run on (its events could not be stored); ``message``
    says why."""

    message: str
    ts: float


Input = Union[
    CreateSession, Submit, ModelFinished, ModelFailed, ToolFinished, Steer, Abort, Interrupted,
    CheckFinished, TimeUp, PermissionDecided, HumanAnswered, Compact, Summarized, RunFailed,
    StopHooksFinished,
]
