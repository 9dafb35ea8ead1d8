"""Agents from files, the layered system prompt, plan mode, skills and memory, through a real daemon."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from roost.daemon.folder._agents import load_agents, parse_agent
from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient

from .conftest import events_until, finished, text, trust, trusting, user_dir, write, write_script

CLAUDE_AGENT = """---
name: code-reviewer
description: Expert code review specialist. Use proactively after code changes.
tools: Read, Grep, Glob, mcp__time__get_current_time
model: sonnet
---
You are a senior code reviewer. Focus on correctness.
"""


def test_a_claude_code_agent_file_loads_as_it_is(project: Path) -> None:
    write(project / ".claude" / "agents" / "reviewer.md", CLAUDE_AGENT)
    found = load_agents(str(project))
    agents, problems = found.agents, found.problems
    reviewer = agents["code-reviewer"]
    assert problems == () and found.widening == ()
    # A tier name stays one: the config resolves it (to Anthropic's model unless it says).
    assert reviewer.model == "sonnet"
    assert reviewer.tools == ("read", "grep", "glob", "time__get_current_time")
    assert reviewer.instructions == "You are a senior code reviewer. Focus on correctness."
    assert reviewer.source == str(project / ".claude" / "agents" / "reviewer.md")


def test_project_overrides_user_overrides_built_in_and_bad_files_are_reported(project: Path) -> None:
    write(user_dir() / "agents" / "default.md", "---\ndescription: mine\n---\nUser default.\n")
    write(user_dir() / "agents" / "helper.md", "---\nname: helper\nmode: full\n---\nUser helper.\n")
    write(project / ".roost" / "agents" / "helper.md", "---\nname: helper\nthink: high\n---\nProject helper.\n")
    bad = write(project / ".roost" / "agents" / "bad.md", "---\nname: bad\ntools: [read\n---\nx\n")
    write(project / ".roost" / "agents" / "nomatter.md", "no front matter\n")
    wrong = write(project / ".roost" / "agents" / "wrong.md", "---\nname: wrong\nmode: yolo\n---\nx\n")
    found = load_agents(str(project))
    agents, problems = found.agents, found.problems
    assert agents["default"].instructions == "User default."
    assert agents["helper"].instructions == "Project helper." and agents["helper"].mode is None
    assert agents["helper"].think == 24576
    assert set(agents) == {"default", "helper"}
    assert any(p.startswith(f"{bad}:3: bad YAML") for p in problems), problems
    assert any(p.startswith(f"{project / '.roost' / 'agents' / 'nomatter.md'}:1: no front matter") for p in problems)
    assert any(str(wrong) in p and "mode must be one of" in p for p in problems)


@pytest.mark.parametrize(
    ("front", "problem"),
    [
        ("tools: 3", "tools must be a list"),
        ("max_turns: 0", "max_turns must be"),
        ("think: lots", "think must be"),
        ("permissions: {allow: ['bash(']}", "not a rule"),
        ("name: 'a b'", "name must be"),
    ],
)
def test_bad_fields_are_named(front: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_agent(f"---\n{front}\n---\nbody\n", "x.md")


async def test_agents_list_and_dispatch_use_the_agent(client: TrioClient, project: Path) -> None:
    model = write_script(project, [text("Reviewed.")])
    write(
        project / ".roost" / "agents" / "reviewer.md",
        f"---\nname: reviewer\ndescription: Reviews.\nmodel: {model}\ntools: [read, grep]\n"
        "max_turns: 3\nmode: full\npermissions: {deny: ['read(secret/**)']}\n---\nYou review.\n",
    )
    write(project / ".roost" / "agents" / "bad.md", "---\n: :\n---\n")
    listed = await client.call("agents.list", cwd=str(project))
    # Listed, as waiting for trust: no run gets it.
    assert [(a["name"], a["trusted"]) for a in listed["agents"]] == [("default", True), ("reviewer", False)], listed
    assert [(a["name"], a["detail"]) for a in listed["untrusted"]] == [("reviewer", "mode: full (no approvals)")]
    with pytest.raises(RpcError) as refused:
        await client.call("dispatch", task="review", agent="reviewer", cwd=str(project))
    assert refused.value.code == ErrorCode.INVALID_PARAMS and f"roost trust {project}" in refused.value.message
    await trust(client, project)
    listed = await client.call("agents.list", cwd=str(project))
    assert [a["name"] for a in listed["agents"]] == ["default", "reviewer"], listed
    assert listed["problems"] and "bad.md" in listed["problems"][0]
    # A project's agent may not name the scripted model (it would script what runs), trusted
    # or not; the user's own flag may.
    with pytest.raises(RpcError) as scripted:
        await client.call("dispatch", task="review", agent="reviewer", cwd=str(project))
    assert "a project's agent cannot name scripted/" in scripted.value.message
    run = await client.call("dispatch", task="review", agent="reviewer", cwd=str(project), model=model, attach=True)
    events = await events_until(client, finished(run["run"]))
    started = next(e for e in events if e["type"] == "run.started")
    assert (started["agent"], started["model"], started["mode"], started["max_turns"]) == ("reviewer", model, "full", 3)
    assert started["tools"] == ["read", "grep"]
    assert started["permissions"]["rules"][-1]["rule"] == "read(secret/**)"
    layers = {layer["name"]: layer for layer in started["prompt"]}
    assert layers["agent"]["chars"] == len("You review.") and layers["agent"]["source"].endswith("reviewer.md")
    with pytest.raises(RpcError) as info:
        await client.call("dispatch", task="x", agent="nobody", cwd=str(project), model=model)
    assert info.value.code == ErrorCode.INVALID_PARAMS and "no agent 'nobody'" in info.value.message


async def test_the_prompt_merges_instruction_files_from_the_root_down(client: TrioClient, project: Path) -> None:
    (project / ".git").mkdir()
    (project / ".git" / "HEAD").write_text("ref: refs/heads/feature-x\n")
    write(project / "AGENTS.md", "Root: use tabs.")
    write(project / "CLAUDE.md", "Root: be brief.")
    write(project / "pkg" / "AGENTS.md", "Pkg: no globals.")
    write(project / "pkg" / "mod.py", "def public(a, b):\n    pass\n\nclass Thing:\n    def method(self, x):\n        pass\n")
    write(project / ".roost" / "skills" / "deploy" / "SKILL.md", "---\nname: deploy\ndescription: How to ship.\n---\nRun make ship.\n")
    write(project / ".roost" / "MEMORY.md", "- tests run with make test\n")
    result = await client.call("prompt", cwd=str(project / "pkg"))
    names = [layer["name"] for layer in result["layers"]]
    assert names == ["agent", "mode", "bootstrap", "instructions", "skills", "memory", "repo map"]
    layers = {layer["name"]: layer["text"] for layer in result["layers"]}
    instructions = layers["instructions"]
    assert instructions.index("Root: use tabs.") < instructions.index("Root: be brief.") < instructions.index("Pkg: no globals.")
    assert "Git branch: feature-x" in layers["bootstrap"] and f"Project: {project}" in layers["bootstrap"]
    assert "- deploy: How to ship." in layers["skills"] and "Run make ship" not in result["text"]
    assert "tests run with make test" in layers["memory"]
    assert "pkg/mod.py\n  def public(a, b)\n  class Thing\n    def method(x)" in layers["repo map"]
    assert result["text"].startswith(layers["agent"])


async def test_the_repo_map_lists_source_first_and_leaves_out_what_others_wrote(
    client: TrioClient, project: Path
) -> None:
    for path in ("README.md", "docs/guide.md", "src/app.ts", "node_modules/left/index.js", ".github/ci.yml", "vendor/lib.go", "src/.hidden.py"):
        write(project / path, "x\n")
    result = await client.call("prompt", cwd=str(project))
    listed = next(x["text"] for x in result["layers"] if x["name"] == "repo map").splitlines()[1:]
    files = [line for line in listed if not line.startswith(" ")]
    assert files == ["c.py", "src/app.ts", "README.md", "a.txt", "b.txt", "docs/guide.md"]


async def test_skill_and_remember_tools(client: TrioClient, project: Path) -> None:
    write(project / ".roost" / "skills" / "deploy" / "SKILL.md", "---\nname: deploy\ndescription: Ship it.\n---\nRun make ship.\n")
    calls: list[dict[str, Any]] = [
        {"type": "tool_use", "name": "skill", "input": {"name": "deploy"}},
        {"type": "tool_use", "name": "remember", "input": {"text": "ship with make ship"}},
        {"type": "tool_use", "name": "skill", "input": {"name": "nope"}},
    ]
    model = write_script(project, calls, [text("ok")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]))
    order = [e["call_id"] for e in events if e["type"] == "tool.started"]
    results = sorted((e for e in events if e["type"] == "tool.finished"), key=lambda e: order.index(e["call_id"]))
    assert "Run make ship." in results[0]["result"]
    assert (project / ".roost" / "MEMORY.md").read_text().startswith("- ship with make ship (")
    assert results[2]["is_error"] and "skills here: deploy" in results[2]["result"]
    assert not [e for e in events if e["type"] == "permission.requested"]  # agent mode allows them
    prompt = await client.call("prompt", session=run["session"])
    assert "ship with make ship" in prompt["text"]


async def test_plan_mode_is_one_call_with_no_tools_and_a_structured_plan(client: TrioClient, project: Path) -> None:
    plan = (
        "The plan:\n1. Add retries to the client. Files: src/client.py, tests/test_client.py\n"
        "2. Document the flag in `README.md`.\n"
    )
    model = write_script(project, [text(plan), {"type": "tool_use", "name": "bash", "input": {"command": "touch x"}}])
    run = await client.call("dispatch", task="add retries", mode="plan", model=model, cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]))
    started = next(e for e in events if e["type"] == "run.started")
    assert started["tools"] == [] and started["mode"] == "plan"
    [planned] = [e for e in events if e["type"] == "plan"]
    assert planned["steps"] == [
        {"step": 1, "text": "Add retries to the client.", "files": ["src/client.py", "tests/test_client.py"]},
        {"step": 2, "text": "Document the flag in `README.md`.", "files": ["README.md"]},
    ]
    assert events[-1]["reason"] == "done" and events[-1]["turns"] == 1
    assert not (project / "x").exists()


async def test_think_takes_levels_and_budgets(client: TrioClient, project: Path) -> None:
    model = write_script(project, [text("hm")])
    for think in ("high", 5000, "off"):
        run = await client.call("dispatch", yes=True, task="t", model=model, cwd=str(project), think=think)
        assert run["run"]
        await client.call("sessions.list")
    with pytest.raises(RpcError) as info:
        await client.call("dispatch", task="t", model=model, cwd=str(project), think="lots")
    assert info.value.code == ErrorCode.INVALID_PARAMS


async def test_a_long_run_compacts_and_goes_on_with_the_summary(client: TrioClient, project: Path) -> None:
    import json

    def reply(*blocks: dict[str, Any], tokens: int) -> dict[str, Any]:
        return {"content": list(blocks), "usage": {"input_tokens": tokens, "output_tokens": 5}}

    def read(path: str) -> dict[str, Any]:
        return {"type": "tool_use", "name": "read", "input": {"path": path}}

    script = project / "long.json"
    script.write_text(json.dumps({
        "responses": [
            reply(read("a.txt"), tokens=100),
            reply(read("b.txt"), tokens=900),
            reply(text("Finished."), tokens=200),
        ],
        "summaries": [reply(text("They read a.txt; next b.txt."), tokens=50)],
    }))
    model = f"scripted/{script}"
    write(project / ".roost" / "config.toml", f'[context_windows]\n"{model}" = 1000\n[compaction]\nkeep_turns = 1\n')
    run = await client.call("dispatch", task="read both", model=model, cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]))
    [compacted] = [e for e in events if e["type"] == "compacted"]
    assert compacted["summary"] == "They read a.txt; next b.txt." and compacted["upto"] == 3
    assert events[-1]["reason"] == "done" and events[-1]["text"] == "Finished."
    prompt = await client.call("prompt", session=run["session"])
    assert prompt["layers"][-1]["name"] == "summary" and "next b.txt" in prompt["layers"][-1]["text"]

    # By hand: nothing more to compact in this short history.
    again = await client.call("compact", session=run["session"], keep_turns=3, attach=True)
    events = await events_until(client, finished(again["run"]))
    assert events[-1]["reason"] == "done" and "nothing to compact" in events[-1]["text"]


def test_the_example_agents_and_skills_in_contrib_load(project: Path) -> None:
    import shutil

    contrib = Path(__file__).resolve().parents[2] / "contrib"
    shutil.copytree(contrib / "agents", project / ".roost" / "agents")
    shutil.copytree(contrib / "skills", project / ".roost" / "skills")
    untrusted = load_agents(str(project))
    # The fixer runs without approvals; the reviewer allows git commands.
    assert [(w.name, w.trusted) for w in untrusted.widening] == [("fixer", False), ("reviewer", False)]
    assert set(untrusted.agents) == {"default"}
    found = load_agents(str(project), trusting(*(project / ".roost" / "agents").glob("*.md")))
    agents, problems = found.agents, found.problems
    assert problems == ()
    assert agents["reviewer"].rules and agents["reviewer"].think == 8192
    assert agents["fixer"].mode == "exec" and "reviewer" in (agents["fixer"].tools or ())
    from roost.daemon.folder._project import find_skills

    assert find_skills(str(project))["changelog"].description.startswith("How to write a CHANGELOG")


@pytest.mark.parametrize("mode", ["plan", "agent", "full", "exec"])
async def test_a_tool_outside_the_agents_list_never_runs_nor_asks(
    client: TrioClient, project: Path, mode: str
) -> None:
    bash = {"type": "tool_use", "name": "bash", "input": {"command": "touch ran.txt"}}
    read = {"type": "tool_use", "name": "read", "input": {"path": "a.txt"}}
    model = write_script(project, [bash, read], [text("done")])
    write(user_dir() / "agents" / "reader.md", f"---\nname: reader\nmodel: {model}\ntools: [read]\n---\nYou read.\n")
    run = await client.call("dispatch", task="t", agent="reader", mode=mode, cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]))
    assert not [e for e in events if e["type"] in ("permission.requested", "human.asked")]
    results = [e for e in events if e["type"] == "tool.finished"]
    expected = "not run: plan mode runs no tools" if mode == "plan" else "the reader agent has no tool bash"
    assert results[0]["result"] == expected and results[0]["is_error"]
    if mode != "plan":
        assert results[1]["result"] == "1\ta.txt" and not results[1]["is_error"]
    assert not (project / "ran.txt").exists()
