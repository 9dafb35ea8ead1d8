"""Custom slash commands (Claude Code's .claude/commands) through a real daemon: expanded in
the daemon at dispatch, so every client gets them, and listed by commands.list."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from roost.daemon.folder._command_text import substitute
from roost.daemon.folder._custom_commands import load_commands, parse_invocation
from roost.daemon.folder._trust import Trust
from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient

from .conftest import events_until, finished, text, write_script

REVIEW = """\
---
description: Review a file for one concern
argument-hint: FILE CONCERN
---
Review $0 for $1 problems.
Everything asked: $ARGUMENTS
"""


def commands(folder: Path, files: dict[str, str]) -> Path:
    """A commands folder (``folder/.claude/commands``) with these files."""
    root = folder / ".claude" / "commands"
    for name, body in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(body)
    return root


def of_type(events: list[dict[str, Any]], type: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("type") == type]


def test_a_command_expands_its_arguments():
    # Claude Code's $N counts from 0; a missing one stays as written.
    body = "Review $0 for $1. All: $ARGUMENTS ($2 is not there)"
    assert substitute(body, ' "src/a b.py"  speed ') == 'Review src/a b.py for speed. All: "src/a b.py"  speed ($2 is not there)'
    plain = "Run the linter and fix what it finds."
    assert substitute(plain, "") == plain
    assert substitute(plain, "src/") == "Run the linter and fix what it finds.\n\nARGUMENTS: src/"


def test_only_a_slash_and_a_name_invoke_a_command():
    assert parse_invocation("/review src/a.py speed") == ("review", "src/a.py speed")
    assert parse_invocation("/frontend:component Button\nwith props") == ("frontend:component", "Button\nwith props")
    assert parse_invocation("/fix-issue") == ("fix-issue", "")
    assert parse_invocation("/etc/hosts is broken") is None
    assert parse_invocation("//review literally") is None
    assert parse_invocation("review") is None


def test_commands_come_from_the_user_and_the_project_which_overrides(project: Path) -> None:
    home = Path.home()
    commands(home, {"review.md": "the user's review: $ARGUMENTS", "mine.md": "only mine"})
    commands(project, {
        "review.md": REVIEW,
        "frontend/component.md": "---\nmodel: haiku\nallowed-tools: Bash(npm test:*), Read\n---\nMake $0.",
        "backend/test.md": "Test the backend.",
        "frontend/test.md": "Test the frontend.",
        "bad name.md": "x",
        "broken.md": "---\ndescription: fine\nthis line is no field\n---\nx",
    })
    found = load_commands(str(project), os.environ)
    assert sorted(found.commands) == ["backend:test", "frontend:component", "frontend:test", "mine", "review"]
    assert found.find("review").scope == "project" and found.find("mine").scope == "user"
    component = found.find("component")
    assert component is found.find("frontend:component")
    assert component.model == "haiku"
    assert component.allowed_tools == ("Bash(npm test:*)", "Read")
    assert component.description == "Make $0."
    with pytest.raises(LookupError, match="could be any of /backend:test, /frontend:test"):
        found.find("test")
    with pytest.raises(LookupError, match="no custom command /nope") as info:
        found.find("nope")
    # Some names and a count of the files skipped; each skipped file is one line of its own.
    assert "/component" in str(info.value) and "2 files skipped: roost commands" in str(info.value)
    assert sorted(Path(path).name for path, _ in found.skipped) == ["bad name.md", "broken.md"]
    assert all("\n" not in p for p in found.problems)
    with pytest.raises(LookupError, match=r"^/broken cannot be used: .*broken.md:3: bad YAML"):
        found.find("broken")
    listed = {c["name"]: c for c in found.describe()}
    assert listed["frontend:component"]["short"] == "component" and listed["frontend:test"]["short"] is None
    assert listed["review"] == {
        "name": "review", "short": "review", "description": "Review a file for one concern",
        "argument_hint": "FILE CONCERN", "model": None, "allowed_tools": [],
        "source": str(project / ".claude" / "commands" / "review.md"), "scope": "project", "kind": "command",
    }


def test_an_untrusted_projects_command_may_not_lead_out_of_it(project: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("the secret")
    root = commands(project, {"ok.md": "fine"})
    (root / "leak.md").symlink_to(secret)
    found = load_commands(str(project), os.environ)
    assert sorted(found.commands) == ["ok"] and "leak.md" in found.problems[0]
    assert sorted(load_commands(str(project), os.environ, Trust({str(project): {}})).commands) == ["leak", "ok"]


async def test_dispatch_expands_a_command_and_records_what_was_typed(client: TrioClient, project: Path) -> None:
    commands(project, {"review.md": REVIEW, "evil.md": "---\nmodel: scripted/s2.json\n---\nDo $0."})
    # The user's own command may name the scripted model; a project's may not (it would
    # script what runs in its folder).
    commands(Path(os.environ["HOME"]), {"frontend/component.md": "---\nmodel: scripted/s2.json\n---\nMake a $0 component."})
    model = write_script(project, [text("looks fine")])
    write_script(project, [text("made")], name="s2.json")
    typed = "/review src/app.py memory"
    started = await client.call("dispatch", task=typed, model=model, cwd=str(project), attach=True)
    events = await events_until(client, finished(started["run"]))
    [run] = of_type(events, "run.started")
    expanded = "Review src/app.py for memory problems.\nEverything asked: src/app.py memory"
    assert run["task"] == expanded
    assert run["command"] == {
        "name": "review", "arguments": "src/app.py memory",
        "source": str(project / ".claude" / "commands" / "review.md"), "typed": typed,
    }
    [message] = of_type(events, "message.user")
    assert message == {**message, "text": expanded, "origin": "task", "command": typed}
    # The command's model, unless the dispatch names one.
    started = await client.call("dispatch", task="/component Button", session=started["session"], attach=True)
    assert started["model"] == "scripted/s2.json"
    events = await events_until(client, finished(started["run"]))
    assert of_type(events, "message.user")[0]["text"] == "Make a Button component."
    with pytest.raises(RpcError) as refused:
        await client.call("dispatch", task="/evil it", session=started["session"])
    assert refused.value.code == ErrorCode.INVALID_PARAMS and "a project's command cannot name scripted/s2.json" in refused.value.message


async def test_an_unknown_command_is_a_clear_error_and_double_slash_is_literal(client: TrioClient, project: Path) -> None:
    commands(project, {"review.md": REVIEW, "deploy/staging.md": "Deploy to staging."})
    model = write_script(project, [text("ok")])
    with pytest.raises(RpcError) as info:
        await client.call("dispatch", task="/reveiw a.py", model=model, cwd=str(project))
    assert info.value.code == ErrorCode.INVALID_PARAMS
    assert "no custom command /reveiw" in info.value.message
    assert "/review" in info.value.message and "/staging" in info.value.message
    started = await client.call("dispatch", task="//reveiw is a typo", model=model, cwd=str(project), attach=True)
    events = await events_until(client, finished(started["run"]))
    assert of_type(events, "run.started")[0]["task"] == "/reveiw is a typo"
    assert "command" not in of_type(events, "run.started")[0]


async def test_commands_list_shows_the_folders_commands(client: TrioClient, project: Path) -> None:
    commands(project, {"review.md": REVIEW, "frontend/component.md": "Make $0."})
    listed = await client.call("commands.list", cwd=str(project))
    assert [(c["name"], c["short"], c["scope"]) for c in listed["commands"]] == [
        ("frontend:component", "component", "project"), ("review", "review", "project")
    ]
    assert listed["commands"][1]["argument_hint"] == "FILE CONCERN" and listed["problems"] == []
    hello = await client.call("hello")
    assert "commands.list" in json.dumps(hello["methods"])
