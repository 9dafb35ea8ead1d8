"""``roost report``: a run's report, as the daemon's ``report`` method folds it from the
stored events; and :func:`report_rows`, the report as rows of text, which the shell's
``/report`` shows too."""

from __future__ import annotations

import json
from typing import Any

import click

from ._connect import daemon, last_session, resolve_session, target, workdir
from ._render import seconds, shorten
from ._safe_text import printable

#: What a figure that the run's daemon did not record shows as.
UNKNOWN = "unknown"


@click.command()
@click.argument("which", metavar="[RUN|SESSION]", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON document.")
@click.pass_obj
def report(obj: dict[str, Any], which: str | None, as_json: bool) -> None:
    """Report on a run: per step and in all, model time, time to first token, retries,
    tool time by tool, tokens (input, output, cache read and write) and cost; approvals
    and questions and how long each waited, compactions, checks; sub-agents nested.

    RUN is a run id (r...); SESSION an id or a unique prefix, for its last run; neither:
    the last run of this folder's last session. Every past run has a report: it is computed
    from the stored events. What an older daemon did not record shows as unknown.

    \b
    Examples:
      roost report
      roost report 3f2a
      roost report r9c1d2e3f4a5b --json | jq .tools
    """
    with daemon(obj) as client:
        if which is None:
            params = {"session": last_session(client, workdir(target(obj), client))}
        elif which.startswith("r"):  # session ids are hex; run ids start with r
            params = {"run": which}
        else:
            params = {"session": resolve_session(client, which)}
        found = client.call("report", params)
    if as_json:
        click.echo(json.dumps(found))
        return
    width = max(len(name) for name, _ in report_rows(found))
    for name, value in report_rows(found):
        click.echo(printable(f"{name:<{width}}  {value}"))


def report_rows(report: dict[str, Any], depth: int = 0) -> list[tuple[str, str]]:
    """A report as (name, value) rows; its sub-agents' follow, indented by ``depth``."""
    pad = "  " * depth
    state = report.get("reason") or "in flight"
    rows = [
        ("run", f"{report['run']} · {state} · {report.get('agent')} · {report.get('mode')} · {report.get('model')}"
                + f" · {_time(report.get('duration'))}"),
        ("task", shorten(str(report.get("task", "")), 100)),
    ]
    if report.get("error"):
        rows.append(("error", shorten(str(report["error"]), 200)))
    steps = report.get("steps") or []
    rows += [
        ("model", f"{len(steps)} call{'' if len(steps) == 1 else 's'} · {_time(report.get('model_time'))} · first token {_time(report.get('ttft'))}"
                  f" (mean) · retries {_known(report.get('retries'))}"),
        ("tools", f"{_time(report.get('tool_time'))}: {_tools(report.get('tools') or {})}"),
        ("tokens", _tokens(report.get("usage") or {})),
        ("cost", _cost(report.get("cost"))),
    ]
    total = report.get("total") or {}
    if report.get("subagents"):
        rows.append(("with sub-agents", f"{_tokens(total.get('usage') or {})} · {_cost(total.get('cost'))}"))
    for approval in report.get("approvals") or []:
        decision = approval.get("decision")
        how = f"{decision} by {approval.get('client')}" if decision else "still waiting"
        rows.append(("approval", f"{approval.get('tool')} ({approval.get('call_id')}): {how}, waited "
                                 f"{_time(approval.get('waited'))}"))
    for question in report.get("questions") or []:
        answered = question.get("answered")
        how = "answered" if answered else "withdrawn" if answered is False else "still waiting"
        rows.append(("question", f"{shorten(str(question.get('question', '')), 60)}: {how}, waited "
                                 f"{_time(question.get('waited'))}"))
    for compaction in report.get("compactions") or []:
        if compaction.get("done"):
            what = (f"{compaction.get('replaced_tokens', 0):,} tokens into {compaction.get('summary_tokens', 0):,}"
                    f" · {_tokens(compaction.get('usage') or {})}")
        elif compaction.get("done") is False:
            what = f"skipped: {compaction.get('reason')}"
        else:
            what = "in flight"
        rows.append(("compaction", f"{what} · {_time(compaction.get('time'))}"))
    for check in report.get("checks") or []:
        rows.append(("check", f"attempt {check.get('attempt')}: exit status {check.get('exit_status')} · "
                              f"{_time(check.get('duration'))}"))
    for step in steps:
        calls = ", ".join(f"{c['name']} {_time(c['time'])}{' ✗' if c['is_error'] else ''}" for c in step["tools"])
        rows.append((f"step {step['step']}", f"model {_time(step.get('model_time'))} (first token "
                     f"{_time(step.get('ttft'))}, retries {_known(step.get('retries'))}) · "
                     f"{_tokens(step.get('usage') or {}, short=True)} · {_cost(step.get('cost'), short=True)}"
                     + (f" · {calls}" if calls else "") + f" · {_time(step.get('duration'))} in all"))
    out = [(pad + name, value) for name, value in rows]
    for sub in report.get("subagents") or []:
        out.append((pad + "sub-agent", f"{sub.get('agent')} for call {sub.get('call_id')}"))
        out += report_rows(sub, depth + 1)
    return out


def _known(value: Any) -> str:
    return UNKNOWN if value is None else str(value)


def _time(value: float | None) -> str:
    return UNKNOWN if value is None else seconds(value)


def _cost(value: float | None, short: bool = False) -> str:
    if value is None:
        return "cost unknown" if short else "unknown (no price for this model)"
    return f"${value:.4f}"


def _tokens(usage: dict[str, int], short: bool = False) -> str:
    tokens_in, tokens_out = usage.get("input_tokens", 0), usage.get("output_tokens", 0)
    read, write = usage.get("cache_read_input_tokens", 0), usage.get("cache_creation_input_tokens", 0)
    total = tokens_in + tokens_out + read + write
    if short:
        return f"{total:,} tokens"
    return f"{total:,} ({tokens_in:,} in, {tokens_out:,} out, {read:,} cache read, {write:,} cache write)"


def _tools(tools: dict[str, dict[str, Any]]) -> str:
    if not tools:
        return "none"
    parts = []
    for name, entry in sorted(tools.items(), key=lambda item: -item[1]["time"]):
        failed = f", {entry['errors']} failed" if entry.get("errors") else ""
        parts.append(f"{name} ×{entry['calls']} {seconds(entry['time'])}{failed}")
    return ", ".join(parts)
