"""Run reports through a real daemon, checked against a run whose timings are known: a local
Anthropic server that waits a set time before it answers, a tool that sleeps a set time, a
person who answers an approval after a set time, and tokens the server reports.

Only lower bounds are asserted, each one a figure that a wrong fold cannot reach (a fold
that read the wrong field, or nothing, gives 0 or None)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from roost.daemon.folder._project import user_config_file
from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient
from tests.fakes.anthropic_server import serve_anthropic

from .conftest import bash, events_until, finished, text, write_script
from .test_subagents import agent_file, call

#: Seconds the server waits before it sends anything, for each reply.
LATENCY = 0.3
#: Seconds the tool sleeps, and the person takes to approve it.
TOOL_SLEEP = 0.2
APPROVAL_WAIT = 0.3
PRICE = {"input": 3.0, "output": 15.0, "cache_read": 0.3, "cache_write": 3.75}


def _prices(model: str) -> None:
    path = user_config_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'[prices."{model}"]\n' + "".join(f"{k} = {v}\n" for k, v in PRICE.items()))


def _cost(usage: dict[str, int]) -> float:
    return (
        usage.get("input_tokens", 0) * PRICE["input"]
        + usage.get("output_tokens", 0) * PRICE["output"]
        + usage.get("cache_read_input_tokens", 0) * PRICE["cache_read"]
        + usage.get("cache_creation_input_tokens", 0) * PRICE["cache_write"]
    ) / 1e6


async def test_a_reports_figures_match_a_run_of_known_timings(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _prices("anthropic/claude-test")
    first_usage = {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 50, "cache_creation_input_tokens": 10}
    last_usage = {"input_tokens": 150, "output_tokens": 8}
    script = [
        {
            "content": [
                {"type": "text", "text": "Sleeping as asked."},
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": f"sleep {TOOL_SLEEP}"}},
            ],
            "stop_reason": "tool_use",
            "usage": first_usage,
            "first_byte_after": LATENCY,
            "delay": 0.01,
        },
        {"status": 529, "headers": {"retry-after": "0.01"}},
        {"content": [{"type": "text", "text": "Slept."}], "usage": last_usage, "first_byte_after": LATENCY},
    ]
    with serve_anthropic(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        run = await client.call(
            "dispatch", task="sleep", model="anthropic/claude-test", cwd=str(project), attach=True, sandbox="off"
        )
        await events_until(client, lambda e: e.get("type") == "permission.requested")
        await trio.sleep(APPROVAL_WAIT)
        await client.call("permission.respond", session=run["session"], call_id="toolu_1", decision="approve")
        await events_until(client, finished(run["run"]))
        assert len(server.requests) == 3
    report = await client.call("report", session=run["session"])
    assert report == await client.call("report", run=run["run"])
    assert (report["run"], report["session"], report["reason"], report["model"]) == (
        run["run"], run["session"], "done", "anthropic/claude-test"
    )
    first, last = report["steps"]
    # The model: no reply before the server's latency; the first token comes before the end.
    for step in (first, last):
        assert step["ttft"] >= LATENCY and step["model_time"] >= step["ttft"]
    assert first["model_time"] >= LATENCY + 0.01 * 5  # the events after the first are spaced
    assert (first["retries"], last["retries"], report["retries"]) == (0, 1, 1)
    assert report["model_time"] == pytest.approx(first["model_time"] + last["model_time"])
    assert report["ttft"] >= LATENCY
    # The tool: at least the time it slept, and only it.
    [call_] = first["tools"]
    assert (call_["name"], call_["is_error"]) == ("bash", False) and call_["time"] >= TOOL_SLEEP
    assert report["tools"] == {"bash": {"calls": 1, "errors": 0, "time": call_["time"]}}
    assert report["tool_time"] == call_["time"]
    # The person: the approval waited at least as long as the test took to answer.
    [approval] = report["approvals"]
    assert (approval["call_id"], approval["decision"]) == ("toolu_1", "approve") and approval["waited"] >= APPROVAL_WAIT
    assert first["duration"] >= first["model_time"] + APPROVAL_WAIT + TOOL_SLEEP
    assert report["duration"] >= first["duration"] + last["model_time"]
    # Tokens as the server reported them, and their cost at the configured price.
    assert first["usage"] == first_usage and last["usage"] == last_usage
    total = {k: first_usage.get(k, 0) + last_usage.get(k, 0) for k in first_usage}
    assert report["usage"] == total and report["total"]["usage"] == total
    assert report["cost"] == pytest.approx(_cost(total)) and first["cost"] == pytest.approx(_cost(first_usage))


async def test_sub_agent_runs_are_reported_nested(client: TrioClient, project: Path) -> None:
    helper = write_script(project, [bash("sleep 0.2")], [text("slept")], name="helper.json")
    lead = write_script(project, [call("helper", "sleep a bit")], [text("done")], name="lead.json")
    agent_file(project, "helper", f"model: {helper}\ntools: [bash]")
    agent_file(project, "lead", f"model: {lead}\ntools: [helper]")
    run = await client.call("dispatch", task="t", agent="lead", cwd=str(project), attach=True, yes=True, sandbox="off")
    events = await events_until(client, finished(run["run"]))
    report = await client.call("report", session=run["session"])
    [sub] = report["subagents"]
    sub_run = next(e["run"] for e in events if e["type"] == "run.started" and e.get("path"))
    assert (sub["run"], sub["agent"], sub["reason"], sub["path"]) == (sub_run, "helper", "done", [sub["call_id"]])
    assert sub["tools"]["bash"]["time"] >= 0.2
    # The call that ran the sub-agent took at least as long as the sub-agent's tool.
    assert report["tools"]["helper"]["time"] >= sub["tools"]["bash"]["time"]
    assert report["total"]["usage"]["output_tokens"] == report["usage"]["output_tokens"] + sub["usage"]["output_tokens"]
    assert await client.call("report", run=sub_run) == sub


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({}, ErrorCode.INVALID_PARAMS),
        ({"run": "rnothing"}, ErrorCode.RUN_NOT_FOUND),
        ({"session": "nosuch"}, ErrorCode.SESSION_NOT_FOUND),
    ],
)
async def test_a_report_of_nothing_is_refused(client: TrioClient, params: dict[str, Any], code: int) -> None:
    with pytest.raises(RpcError) as info:
        await client.call("report", **params)
    assert info.value.code == code


async def test_a_session_with_no_run_yet_has_no_report(client: TrioClient, project: Path) -> None:
    session = (await client.call("sessions.create", cwd=str(project)))["session"]
    with pytest.raises(RpcError) as info:
        await client.call("report", session=session)
    assert info.value.code == ErrorCode.RUN_NOT_FOUND and "no run yet" in info.value.message


async def test_a_sessions_report_is_its_last_runs_in_the_session_and_in_a_fork(client: TrioClient, project: Path) -> None:
    runs = []
    session = None
    for word in ("one", "two", "three"):
        model = write_script(project, [bash(f"echo {word}")], [text(word)], name=f"{word}.json")
        params = {"session": session} if session else {"cwd": str(project)}
        run = await client.call("dispatch", task=word, model=model, attach=True, yes=True, sandbox="off", **params)
        await events_until(client, finished(run["run"]))
        session = run["session"]
        runs.append(run["run"])
    last = await client.call("report", session=session)
    assert last == await client.call("report", run=runs[-1])
    assert last["run"] == runs[-1] and last["task"] == "three"
    assert (await client.call("report", run=runs[0]))["task"] == "one"
    # A fork whose last run is its parent's reports it from the parent's stored events.
    fork = await client.call("sessions.fork", session=session)
    assert await client.call("report", session=fork["session"]) == {**last, "session": fork["session"]}
