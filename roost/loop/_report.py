"""Run reports: what a run did, how long each part took and what it cost, as a pure fold of
a session's stored events.

Nothing is recorded for the report alone: every figure is read from the events the run
stored anyway, so every past run has a report, and the report of a run is the same whoever
asks and whenever. What a daemon did not record yet when the run was made (time to first
token and retries, before they were added to ``message.assistant``) is ``None``: unknown,
never a guess. Times come from the events (their ``ts`` and latencies); a run still in
flight is measured up to ``now``, which the caller passes in (the loop reads no clock).

The rules of the fold:

- A run is the events of its id without a ``path``. A sub-agent's events carry the path of
  tool call ids that leads to it; its run belongs to the top-level run whose tool call starts
  that path, and is reported nested under its caller (``subagents``), path by path.
- A step is a model call: ``step.started`` opens it; its ``message.assistant`` gives the
  model time (``latency``; a reply cut short by an abort: from the step's start to the
  abort), time to first token (``ttft``), retries, usage and stop reason; the
  ``tool.finished`` events until the next step are its tool calls (``latency`` each); its
  ``step.finished`` gives its wall time.
- Usage is what the provider reported for each reply, and for each compaction's summary
  (those are listed under ``compactions`` and counted in the run's usage too). Cost is that
  usage at the price ``run.started`` recorded (None: no price known).
- An approval waited from its ``permission.requested`` to its ``permission.resolved`` (a
  question from ``human.asked`` to ``human.answered``); one still open, until ``now``.
- ``total`` adds the run's sub-agents (all the way down) to its own usage and cost.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from . import _events as ev
from ._events import Event
from ._settings import AGENT, MODE
from ._state import cost

#: The token counts a report sums (as providers report them in ``usage``).
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def run_report(events: Iterable[Event], run: str | None = None, now: float | None = None) -> dict[str, Any] | None:
    """The report of ``run`` (None: the session's last run; a sub-agent's run is reported
    with its own sub-agents) from a session's stored ``events``, in order; None when there is
    no such run.

    ``now`` (seconds, wall clock) measures what is still in flight: a run's duration, an open
    approval's wait. Without it those are None.
    """
    tracks: dict[tuple[str, tuple[str, ...]], _Track] = {}
    #: The top-level run of each of its tool calls (a sub-agent's path starts with one).
    call_runs: dict[str, str] = {}
    last: str | None = None
    for event in events:
        if event.live:
            continue
        path = tuple(event.data.get("path") or ())
        top = event.run if not path else call_runs.get(path[0])
        if top is None:
            continue
        key = (top, path)
        if event.type == ev.RUN_STARTED:
            tracks[key] = _Track(event, path)
            if not path:
                last = top
        track = tracks.get(key)
        if track is None:
            continue
        track.apply(event)
        if not path and event.type == ev.TOOL_STARTED:
            call_runs[event.data["call_id"]] = top
    wanted = run if run is not None else last
    at = next((key for key, track in tracks.items() if track.run == wanted), None)
    if at is None:
        return None
    top, path = at
    return _nested({p: track for (t, p), track in tracks.items() if t == top}, path, now)


def _nested(tracks: Mapping[tuple[str, ...], _Track], path: tuple[str, ...], now: float | None) -> dict[str, Any]:
    """The report of the track at ``path`` with its sub-agents' nested, and its totals."""
    out = tracks[path].result(now)
    children = [p for p in tracks if len(p) == len(path) + 1 and p[: len(path)] == path]
    subs = [_nested(tracks, p, now) for p in sorted(children, key=lambda p: tracks[p].started)]
    usage = dict(out["usage"])
    total_cost = out["cost"]
    for sub in subs:
        usage = _add(usage, sub["total"]["usage"])
        total_cost = None if total_cost is None or sub["total"]["cost"] is None else total_cost + sub["total"]["cost"]
    out["subagents"] = subs
    out["total"] = {"usage": usage, "cost": total_cost}
    return out


class _Track:
    """One run's figures so far (a run of the session, or of a sub-agent)."""

    def __init__(self, started: Event, path: tuple[str, ...]) -> None:
        d = started.data
        self.run = started.run or ""
        self.session = started.session
        self.path = path
        self.started = started.ts
        self.head = {
            "agent": d.get("agent", AGENT),
            "mode": d.get("mode", MODE),
            "model": d.get("model", ""),
            "task": d.get("task", ""),
        }
        self.price: Mapping[str, float] | None = d.get("price")
        self.finished: Mapping[str, Any] | None = None
        self.ended: float | None = None
        self.steps: list[dict[str, Any]] = []
        self.step_started = 0.0
        self.approvals: dict[str, dict[str, Any]] = {}
        self.questions: dict[str, dict[str, Any]] = {}
        self.compactions: list[dict[str, Any]] = []
        self.checks: list[dict[str, Any]] = []

    def apply(self, event: Event) -> None:
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(self, event)

    # -- one handler per event type -------------------------------------------------------

    def _step_started(self, e: Event) -> None:
        self.step_started = e.ts
        self.steps.append(
            {
                "step": e.data.get("step", len(self.steps) + 1),
                "started": e.ts,
                "duration": None,
                "model_time": None,
                "ttft": None,
                "retries": None,
                "stop_reason": None,
                "usage": {},
                "cost": None,
                "tools": [],
            }
        )

    def _message_assistant(self, e: Event) -> None:
        if not self.steps:
            return
        step, d = self.steps[-1], e.data
        usage = _usage(d.get("usage"))
        step.update(
            # A reply cut short by an abort took until the abort.
            model_time=max(0.0, e.ts - self.step_started) if d.get("partial") else d.get("latency"),
            ttft=d.get("ttft"),
            retries=d.get("retries"),
            stop_reason=d.get("stop_reason"),
            usage=usage,
            cost=cost(usage, self.price),
        )

    def _tool_finished(self, e: Event) -> None:
        if not self.steps:
            return
        d = e.data
        self.steps[-1]["tools"].append(
            {
                "call_id": d.get("call_id"),
                "name": d.get("name", ""),
                "time": float(d.get("latency") or 0.0),
                "is_error": bool(d.get("is_error")),
            }
        )

    def _step_finished(self, e: Event) -> None:
        if self.steps:
            self.steps[-1]["duration"] = e.data.get("latency")

    def _permission_requested(self, e: Event) -> None:
        d = e.data
        self.approvals[d["call_id"]] = {
            "call_id": d["call_id"],
            "tool": d.get("tool", ""),
            "asked": e.ts,
            "decision": None,
            "scope": None,
            "client": None,
            "waited": None,
        }

    def _permission_resolved(self, e: Event) -> None:
        approval = self.approvals.get(e.data["call_id"])
        if approval is not None:
            approval.update(
                decision=e.data.get("decision"),
                scope=e.data.get("scope"),
                client=e.data.get("client"),
                waited=max(0.0, e.ts - approval["asked"]),
            )

    def _human_asked(self, e: Event) -> None:
        d = e.data
        self.questions[d["call_id"]] = {
            "call_id": d["call_id"],
            "question": d.get("question", ""),
            "asked": e.ts,
            "answered": None,
            "client": None,
            "waited": None,
        }

    def _human_answered(self, e: Event) -> None:
        question = self.questions.get(e.data["call_id"])
        if question is not None:
            question.update(
                answered=not e.data.get("cancelled"),
                client=e.data.get("client"),
                waited=max(0.0, e.ts - question["asked"]),
            )

    def _compaction_started(self, e: Event) -> None:
        self.compactions.append({"upto": e.data.get("upto"), "started": e.ts, "time": None, "done": None})

    def _compacted(self, e: Event) -> None:
        if self.compactions and self.compactions[-1]["done"] is None:
            usage = _usage(e.data.get("usage"))
            self.compactions[-1].update(
                done=True,
                time=max(0.0, e.ts - self.compactions[-1]["started"]),
                replaced_tokens=e.data.get("replaced_tokens"),
                summary_tokens=e.data.get("summary_tokens"),
                usage=usage,
                cost=cost(usage, self.price),
            )

    def _compaction_skipped(self, e: Event) -> None:
        if self.compactions and self.compactions[-1]["done"] is None:
            self.compactions[-1].update(
                done=False, time=max(0.0, e.ts - self.compactions[-1]["started"]), reason=e.data.get("reason")
            )

    def _check_finished(self, e: Event) -> None:
        d = e.data
        self.checks.append({"attempt": d.get("attempt"), "exit_status": d.get("exit_status"), "duration": d.get("duration")})

    def _run_finished(self, e: Event) -> None:
        self.finished = e.data
        self.ended = e.ts

    # -- the report ------------------------------------------------------------------------

    def result(self, now: float | None) -> dict[str, Any]:
        """The run's report (without sub-agents and totals: see ``_nested``)."""
        steps = [dict(s, tools=list(s["tools"])) for s in self.steps]
        calls = [call for s in steps for call in s["tools"]]
        tools: dict[str, dict[str, Any]] = {}
        for call in calls:
            entry = tools.setdefault(call["name"], {"calls": 0, "errors": 0, "time": 0.0})
            entry["calls"] += 1
            entry["errors"] += call["is_error"]
            entry["time"] += call["time"]
        usage: dict[str, int] = {}
        for part in [s["usage"] for s in steps] + [c.get("usage") or {} for c in self.compactions]:
            usage = _add(usage, part)
        ttfts = [s["ttft"] for s in steps if s["ttft"] is not None]
        retries = [s["retries"] for s in steps if s["retries"] is not None]
        finished = self.finished
        if finished is not None:
            duration = finished.get("duration")
        else:
            duration = max(0.0, now - self.started) if now is not None else None
        out: dict[str, Any] = {
            "run": self.run,
            "session": self.session,
            **self.head,
            "started": self.started,
            "ended": self.ended,
            "reason": finished.get("reason") if finished is not None else None,
            "error": finished.get("error") if finished is not None else None,
            "duration": duration,
            "steps": steps,
            "model_time": sum(s["model_time"] for s in steps if s["model_time"] is not None),
            "ttft": sum(ttfts) / len(ttfts) if ttfts else None,
            "retries": sum(retries) if retries else None,
            "tool_time": sum(call["time"] for call in calls),
            "tools": tools,
            "usage": usage,
            "cost": cost(usage, self.price),
            "approvals": [self._waited(a, now) for a in self.approvals.values()],
            "questions": [self._waited(q, now) for q in self.questions.values()],
            "compactions": [{k: v for k, v in c.items() if k != "started"} for c in self.compactions],
            "checks": list(self.checks),
        }
        if self.path:
            out["path"] = list(self.path)
            out["call_id"] = self.path[-1]
        return out

    def _waited(self, request: dict[str, Any], now: float | None) -> dict[str, Any]:
        """A request as reported; one still open has waited until ``now``."""
        out = dict(request)
        if out["waited"] is None and now is not None and self.finished is None:
            out["waited"] = max(0.0, now - out["asked"])
        return out


def _usage(raw: Any) -> dict[str, int]:
    """The token counts of a reported usage (other keys and non-integers left out)."""
    if not isinstance(raw, Mapping):
        return {}
    return {k: raw[k] for k in USAGE_KEYS if isinstance(raw.get(k), int) and not isinstance(raw.get(k), bool)}


def _add(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    out = dict(a)
    for key, value in b.items():
        out[key] = out.get(key, 0) + value
    return out


_HANDLERS = {
    ev.STEP_STARTED: _Track._step_started,
    ev.MESSAGE_ASSISTANT: _Track._message_assistant,
    ev.TOOL_FINISHED: _Track._tool_finished,
    ev.STEP_FINISHED: _Track._step_finished,
    ev.PERMISSION_REQUESTED: _Track._permission_requested,
    ev.PERMISSION_RESOLVED: _Track._permission_resolved,
    ev.HUMAN_ASKED: _Track._human_asked,
    ev.HUMAN_ANSWERED: _Track._human_answered,
    ev.COMPACTION_STARTED: _Track._compaction_started,
    ev.COMPACTED: _Track._compacted,
    ev.COMPACTION_SKIPPED: _Track._compaction_skipped,
    ev.CHECK_FINISHED: _Track._check_finished,
    ev.RUN_FINISHED: _Track._run_finished,
}
