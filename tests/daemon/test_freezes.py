"""No pattern from a model or a project, and no file of a project, can freeze the daemon:
patterns match in linear time (RE2), and the repo map skips a file the parser chokes on.
Each case here took seconds to forever before (exponential backtracking): that these tests
end at all is the proof; the fail_after is a guard against a hang, not a timing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from roost.daemon.tools import ToolContext, ToolRegistry
from roost.loop import Guardrail, PatternError, Policy, decide, glob_matcher, linear_regex, parse_rule
from roost.loop._guardrails import tripped
from roost.protocol.trio_client import TrioClient, open_client

from .conftest import events_until, finished, text, write_script


def test_a_glob_of_many_double_stars_matches_a_deep_path_at_once() -> None:
    pattern = "/".join(["**"] * 20) + "/x"
    deep = "/".join(["a"] * 60) + "/y"
    assert glob_matcher(pattern)(deep) is False and glob_matcher(pattern)(deep[:-1] + "x") is True


def test_a_rule_of_many_stars_judges_a_long_command_at_once() -> None:
    policy = Policy((parse_rule("bash(a*a*a*a*a*a*a*a*a*a*a*a*a*a*b)", "deny", "project"),), home="/h")
    assert decide(policy, "agent", (), "bash", {"command": "a" * 200}, "/p").action == "ask"


def test_a_guardrail_that_backtracks_runs_linear_or_is_refused() -> None:
    rail = Guardrail("evil", "input", r"(a+)+$")
    assert tripped((rail,), "input", ["a" * 5000 + "!"]) is None
    with pytest.raises(PatternError, match="no backreferences or lookaround"):
        linear_regex(r"(a)\1")


async def test_grep_with_a_catastrophic_pattern_ends_and_another_client_is_answered(
    client: TrioClient, project: Path
) -> None:
    # A 10 MB file of lines that make (a+)+$ backtrack forever in Python's re.
    (project / "big.txt").write_text(("a" * 60 + "!\n") * 170_000)
    grep = {"type": "tool_use", "name": "grep", "input": {"pattern": "(a+)+$", "path": "big.txt"}}
    model = write_script(project, [grep], [text("done")])
    with trio.fail_after(60):
        run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True, yes=True)
        async with open_client(os.environ["ROOST_SOCKET"]) as other:
            assert (await other.call("status"))["pid"] > 0
        events = await events_until(client, finished(run["run"]), timeout=60)
    [found] = [e for e in events if e["type"] == "tool.finished"]
    assert not found["is_error"] and "no matches" in found["result"]


async def test_a_python_file_that_chokes_the_parser_fails_no_dispatch(client: TrioClient, project: Path) -> None:
    (project / "deep.py").write_text("x = " + "(" * 100_000 + ")" * 100_000 + "\n")
    (project / "sum.py").write_text("x = " + "+".join(["1"] * 200_000) + "\n")
    prompt = await client.call("prompt", cwd=str(project))
    assert "deep.py" in prompt["text"] and "sum.py" in prompt["text"]
    model = write_script(project, [text("done")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    assert (await events_until(client, finished(run["run"])))[-1]["reason"] == "done"
