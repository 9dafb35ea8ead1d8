"""Claude Code's rules (``~/.claude/rules``, ``.claude/rules``) through a real daemon: those
without ``paths`` are instructions of every run; those with ``paths`` reach the model with
the first result of a run about a matching file; a project's rules read nothing outside it
unless trusted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from roost.protocol.trio_client import TrioClient
from tests.fakes.anthropic_server import serve_anthropic

from .conftest import events_until, finished, trust, write


def home() -> Path:
    return Path(os.environ["HOME"])


def instructions(prompt: dict) -> dict:
    return next(x for x in prompt["layers"] if x["name"] == "instructions")


async def test_rules_without_paths_are_instructions_and_those_with_paths_are_not(client: TrioClient, project: Path) -> None:
    write(home() / ".claude" / "CLAUDE.md", "Mine: answer in English.")
    write(home() / ".claude" / "rules" / "style.md", "Mine rule: short sentences.")
    write(home() / ".claude" / "rules" / "langs" / "go.md", '---\npaths:\n  - "**/*.go"\n---\nMine Go: gofmt.')
    write(project / "CLAUDE.md", "Project: run make test.")
    write(project / ".claude" / "rules" / "testing.md", "---\ndescription: tests\n---\nProject rule: pytest -q.")
    write(project / ".claude" / "rules" / "frontend" / "react.md", "Project nested: hooks at the top.")
    write(project / ".claude" / "rules" / "api.md", "---\npaths: src/api/**/*.{ts,tsx}\n---\nProject API: validate input.")
    write(project / ".claude" / "rules" / ".hidden.md", "HIDDEN")
    write(project / ".claude" / "rules" / "notes.txt", "NOT MARKDOWN")
    write(project / ".claude" / "rules" / "broken.md", "---\npaths: [unclosed\n---\nBROKEN")
    layer = instructions(await client.call("prompt", cwd=str(project)))
    body = layer["text"]
    order = ["Mine: answer", "Mine rule:", "Project: run", "Project rule:", "Project nested:"]
    assert [body.index(part) for part in order] == sorted(body.index(part) for part in order), body
    for absent in ("Mine Go", "Project API", "HIDDEN", "NOT MARKDOWN", "BROKEN"):
        assert absent not in body
    assert str(project / ".claude" / "rules" / "frontend" / "react.md") in layer["source"]


async def test_a_rule_with_paths_reaches_the_model_with_the_first_matching_file(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(project / "src" / "api" / "users.ts", "export const users = 1;\n")
    write(project / "src" / "api" / "orders.tsx", "export const orders = 2;\n")
    write(project / "README.md", "readme\n")
    write(project / ".claude" / "rules" / "api.md", "---\npaths: src/api/**/*.{ts,tsx}\n---\nProject API: validate input.")
    write(home() / ".claude" / "rules" / "ts.md", "---\npaths:\n  - '**/*.ts'\n---\nMine TS: no any.")

    def read(n: int, path: str) -> dict:
        return {
            "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": "read", "input": {"path": path}}],
            "stop_reason": "tool_use",
        }

    script = [
        read(1, "README.md"),
        read(2, "src/api/users.ts"),
        read(3, str(project / "src" / "api" / "orders.tsx")),
        {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn"},
    ]
    with serve_anthropic(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        run = await client.call("dispatch", yes=True, task="t", model="anthropic/claude-test", cwd=str(project), attach=True)
        events = await events_until(client, finished(run["run"]))
        bodies = [r.body for r in server.requests]
    assert events[-1]["reason"] == "done"
    # Neither is in the system prompt.
    assert "Project API" not in json.dumps(bodies[0]["system"]) and "Mine TS" not in json.dumps(bodies[0]["system"])

    def last_result(body: dict) -> str:
        return json.dumps(body["messages"][-1]["content"])

    assert "Project API" not in last_result(bodies[1]) and "Mine TS" not in last_result(bodies[1])
    # users.ts: both rules, the user's first; once each.
    second = last_result(bodies[2])
    assert "export const users" in second and second.index("Mine TS: no any.") < second.index("Project API: validate input.")
    assert "<system-reminder>" in second
    # orders.tsx matches the project's rule again: the run was given it already.
    third = last_result(bodies[3])
    assert "export const orders" in third and "Project API" not in third and "Mine TS" not in third
    given = [e.get("meta", {}).get("rules") for e in events if e["type"] == "tool.finished"]
    assert given[1] == [str(home() / ".claude" / "rules" / "ts.md"), str(project / ".claude" / "rules" / "api.md")]

    # A new run is given the rule again with its first matching file.
    with serve_anthropic([read(4, "src/api/orders.tsx"), {"content": [{"type": "text", "text": "ok"}]}]) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        again = await client.call(
            "dispatch", yes=True, task="t", model="anthropic/claude-test", session=run["session"], attach=True
        )
        await events_until(client, finished(again["run"]))
        assert "Project API: validate input." in last_result(server.requests[1].body)


async def test_a_projects_rules_lead_nowhere_outside_it_until_trusted(client: TrioClient, project: Path) -> None:
    outside = write(project.parent / "shared" / "team.md", "SHARED TEAM RULE")
    write(project.parent / "shared" / "deeper" / "more.md", "SHARED DEEPER RULE")
    key = write(home() / ".aws" / "credentials", "AWS SECRET KEY")
    rules = project / ".claude" / "rules"
    write(rules / "own.md", "Own rule.")
    (rules / "team.md").symlink_to(outside)
    (rules / "creds.md").symlink_to(key)
    (rules / "linked").symlink_to(outside.parent, target_is_directory=True)
    (rules / "loop").symlink_to(rules, target_is_directory=True)  # a cycle ends
    write(project / ".claude" / "settings.json", json.dumps({"permissions": {"allow": ["Bash(ls:*)"]}}))
    text = (await client.call("prompt", cwd=str(project)))["text"]
    assert "Own rule." in text and text.count("Own rule.") == 1
    assert "SHARED" not in text and "AWS SECRET KEY" not in text
    # A trusted project's rules may be links to a team's shared rules (as Claude Code's docs
    # suggest).
    await trust(client, project)
    text = (await client.call("prompt", cwd=str(project)))["text"]
    assert "SHARED TEAM RULE" in text and "SHARED DEEPER RULE" in text and text.count("Own rule.") == 1
