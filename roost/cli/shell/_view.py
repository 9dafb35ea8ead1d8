"""The shell's view of one session: a fold over the event maps it has seen.

The daemon's state of a session is a fold over its events; so is the shell's view of it,
built from the same maps, client side. It answers what the toolbar and the prompts need:
is a run in flight and what is it doing (thinking, running a tool, waiting on a person),
which tools are running since when, which approvals and questions are open, the model's
checklist, and the tokens and cost so far. It never renders and does no IO. (A run's report
is the daemon's: the ``report`` method folds the stored events.)

Rules:
- Events are applied in the order they arrive. A stored event whose ``seq`` is not above
  the last one seen is a repeat (a re-attach overlaps what was seen) and is ignored.
- A request (``permission.requested``, ``human.asked``) is open until its
  ``permission.resolved`` / ``human.answered``, or until its run finishes.
- Live events (no ``seq``) change what is shown now but never ``last_seq``.
- Events of a sub-agent carry a ``path`` (the tool call ids that lead to it): its tools,
  requests, tokens and cost count; its own run and step boundaries, and its checklist, do
  not move the session's.
- The checklist is the one in the last successful ``todo`` result (``meta.todos``) of the
  session's own agent; a run that starts clears it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class Phase(enum.Enum):
    """What the session is doing, as the toolbar says it."""

    #: No run in flight.
    IDLE = "idle"
    #: A run is waiting on the model.
    THINKING = "thinking"
    #: A run is waiting on one or more tools.
    TOOL = "running tool"
    #: A run is waiting on a person: an approval or an answer.
    WAITING = "waiting"


@dataclass(slots=True)
class ToolCall:
    """A tool call in flight."""

    call_id: str
    name: str
    input: Any
    started: float
    depth: int = 0


@dataclass(frozen=True, slots=True)
class Request:
    """An open approval (``kind == "permission"``) or question (``kind == "question"``)."""

    call_id: str
    kind: str
    run: str | None
    asked: float
    tool: str = ""
    input: Any = None
    reason: str = ""
    session_rules: tuple[str, ...] = ()
    #: The wider choice for the session: the commands with any arguments.
    session_rules_any: tuple[str, ...] = ()
    deadline: float | None = None
    question: str = ""
    choices: tuple[str, ...] = ()
    depth: int = 0
    #: What an edit or write would change (a unified diff), when the daemon could tell.
    diff: str = ""

    def as_map(self) -> dict[str, Any]:
        """What the session may add, as the request's event says it (``_approval_keys``
        reads it)."""
        return {"session_rules": list(self.session_rules), "session_rules_any": list(self.session_rules_any)}


@dataclass(slots=True)
class RunStats:
    """One run as the toolbar follows it: which, since when, how it ended, its tokens and
    cost so far (for the session's figures)."""

    run: str
    task: str = ""
    model: str = ""
    agent: str = ""
    mode: str = ""
    started: float = 0.0
    reason: str | None = None
    duration: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float | None = None


class SessionView:
    """Everything the shell shows about one session that is not the transcript."""

    def __init__(self, session: str, cwd: str = "") -> None:
        self.session = session
        self.cwd = cwd
        #: The last stored event seen; a re-attach asks for what came after it.
        self.last_seq = 0
        #: Connections attached to the session (``None``: the daemon does not say).
        self.clients: int | None = None
        #: The run in flight, and the last run that finished.
        self.run: RunStats | None = None
        self.last_run: RunStats | None = None
        #: Model, agent and mode of the latest run (what the next one inherits by default).
        self.model = ""
        self.agent = ""
        self.mode = ""
        self.step_started: float | None = None
        self.tools: dict[str, ToolCall] = {}
        self.pending: dict[str, Request] = {}
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost: float | None = None
        #: The model's checklist: ``{"content", "status", "activeForm"?}`` maps, in order.
        self.todos: list[dict[str, Any]] = []
        #: The seq of each task's ``run.started``, oldest first (not compactions'): where
        #: ``/rewind`` cuts.
        self.task_seqs: list[int] = []
        #: The background commands running (``bash`` with ``run_in_background``), as the
        #: path of the run that started each and its id: they end with that run.
        self.background: set[tuple[tuple[str, ...], str]] = set()

    def apply(self, event: dict[str, Any]) -> bool:
        """Fold one event in; False (and no change) when it is a repeat."""
        seq = event.get("seq")
        if seq is not None:
            if seq <= self.last_seq:
                return False
            self.last_seq = seq
        kind = str(event.get("type"))
        if kind in _TOP_LEVEL_ONLY and _depth(event):
            return True
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, event)
        return True

    @property
    def phase(self) -> Phase:
        """What the session is doing now."""
        if self.run is None:
            return Phase.IDLE
        if self.pending:
            return Phase.WAITING
        if self.tools:
            return Phase.TOOL
        return Phase.THINKING

    def first_request(self, kind: str | None = None) -> Request | None:
        """The oldest open request (of ``kind``, when given)."""
        for request in self.pending.values():
            if kind is None or request.kind == kind:
                return request
        return None

    # -- handlers, one per event type --------------------------------------------------------

    def _run_started(self, e: dict[str, Any]) -> None:
        self.run = RunStats(
            run=str(e.get("run")),
            task=str(e.get("task", "")),
            model=str(e.get("model", "")),
            agent=str(e.get("agent", "")),
            mode=str(e.get("mode", "")),
            started=float(e.get("ts", 0.0)),
        )
        self.model, self.agent, self.mode = self.run.model, self.run.agent, self.run.mode
        self.tools.clear()
        self.step_started = None
        self.todos = []
        if e.get("seq") is not None and self.run.mode != "compact":
            self.task_seqs.append(int(e["seq"]))

    def _step_started(self, e: dict[str, Any]) -> None:
        self.step_started = float(e.get("ts", 0.0))

    def _tool_started(self, e: dict[str, Any]) -> None:
        call_id = str(e.get("call_id"))
        self.tools[call_id] = ToolCall(
            call_id, str(e.get("name", "")), e.get("input"), float(e.get("ts", 0.0)), _depth(e)
        )

    def _tool_finished(self, e: dict[str, Any]) -> None:
        self.tools.pop(str(e.get("call_id")), None)
        meta = e.get("meta") or {}
        path = tuple(str(p) for p in e.get("path") or ())
        shell = meta.get("shell")
        if isinstance(shell, str):
            if meta.get("background") and not e.get("is_error"):
                self.background.add((path, shell))
            elif not meta.get("running", False):
                self.background.discard((path, shell))
        # A sub-agent's commands end with it, when its call (the caller's) finishes.
        inner = (*path, str(e.get("call_id")))
        self.background = {b for b in self.background if b[0][: len(inner)] != inner}
        todos = (e.get("meta") or {}).get("todos")
        if e.get("name") == "todo" and isinstance(todos, list) and not e.get("is_error") and not _depth(e):
            self.todos = [t for t in todos if isinstance(t, dict)]

    def _step_finished(self, e: dict[str, Any]) -> None:
        usage = e.get("usage") or {}
        tokens_in = int(usage.get("input_tokens") or 0)
        tokens_out = int(usage.get("output_tokens") or 0)
        self.input_tokens += tokens_in
        self.output_tokens += tokens_out
        step_cost = e.get("cost")
        if step_cost is not None:
            self.cost = (self.cost or 0.0) + float(step_cost)
        run = self.run
        if run is not None:
            run.input_tokens += tokens_in
            run.output_tokens += tokens_out
            if step_cost is not None:
                run.cost = (run.cost or 0.0) + float(step_cost)
        if not _depth(e):
            self.step_started = None

    def _permission_requested(self, e: dict[str, Any]) -> None:
        call_id = str(e.get("call_id"))
        self.pending[call_id] = Request(
            call_id=call_id,
            kind="permission",
            run=e.get("run"),
            asked=float(e.get("ts", 0.0)),
            tool=str(e.get("tool", "")),
            input=e.get("input"),
            reason=str(e.get("reason") or ""),
            session_rules=tuple(str(r) for r in e.get("session_rules") or ()),
            session_rules_any=tuple(str(r) for r in e.get("session_rules_any") or ()),
            deadline=e.get("deadline"),
            depth=_depth(e),
            diff=str(e.get("diff") or ""),
        )

    def _human_asked(self, e: dict[str, Any]) -> None:
        call_id = str(e.get("call_id"))
        self.pending[call_id] = Request(
            call_id=call_id,
            kind="question",
            run=e.get("run"),
            asked=float(e.get("ts", 0.0)),
            question=str(e.get("question", "")),
            choices=tuple(str(c) for c in e.get("choices") or ()),
            deadline=e.get("deadline"),
            depth=_depth(e),
        )

    def _answered(self, e: dict[str, Any]) -> None:
        self.pending.pop(str(e.get("call_id")), None)

    def _run_finished(self, e: dict[str, Any]) -> None:
        self.background.clear()
        run = self.run
        if run is not None and run.run == e.get("run"):
            # The run's totals also count a step cut short (aborted), which has no
            # step.finished: the difference goes into the session's figures.
            usage = e.get("usage") or {}
            extra_in = int(usage.get("input_tokens") or 0) - run.input_tokens
            extra_out = int(usage.get("output_tokens") or 0) - run.output_tokens
            self.input_tokens += max(0, extra_in)
            self.output_tokens += max(0, extra_out)
            run.input_tokens += max(0, extra_in)
            run.output_tokens += max(0, extra_out)
            if e.get("cost") is not None and float(e["cost"]) > (run.cost or 0.0):
                self.cost = (self.cost or 0.0) + float(e["cost"]) - (run.cost or 0.0)
                run.cost = float(e["cost"])
            run.reason = str(e.get("reason"))
            run.duration = float(e.get("duration") or 0.0)
            self.last_run = run
            self.run = None
        self.tools.clear()
        self.step_started = None
        # A request of a run that ended is answered by nobody any more.
        for call_id in [c for c, r in self.pending.items() if r.run == e.get("run")]:
            del self.pending[call_id]


def _depth(event: dict[str, Any]) -> int:
    """How deep in sub-agents an event is: the length of its ``path`` of tool call ids."""
    path = event.get("path")
    return len(path) if isinstance(path, list) else 0


#: Boundaries that belong to the session's own run, not to a sub-agent's.
_TOP_LEVEL_ONLY = frozenset({"run.started", "run.finished", "step.started"})

_HANDLERS = {
    "run.started": SessionView._run_started,
    "step.started": SessionView._step_started,
    "tool.started": SessionView._tool_started,
    "tool.finished": SessionView._tool_finished,
    "step.finished": SessionView._step_finished,
    "permission.requested": SessionView._permission_requested,
    "permission.resolved": SessionView._answered,
    "human.asked": SessionView._human_asked,
    "human.answered": SessionView._answered,
    "run.finished": SessionView._run_finished,
}
