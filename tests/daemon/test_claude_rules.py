"""Claude Code's rule syntax through a real daemon: a user who moves their rules over is
protected as in Claude Code, and a rule roost cannot use is an error, not a rule that
silently never matches."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient

from .conftest import bash, events_until, finished, text, trust, write_script


def _read(path: str) -> dict:
    return {"type": "tool_use", "name": "read", "input": {"path": path}}


async def test_claude_code_rules_on_the_dispatch_hold(client: TrioClient, project: Path) -> None:
    (project / "secret.txt").write_text("THE SECRET\n")
    model = write_script(project, [_read("secret.txt"), bash("git status --short")], [text("done")])
    run = await client.call(
        "dispatch", task="t", model=model, cwd=str(project), attach=True,
        deny=["Read(./secret.txt)"], allow=["Bash(git status:*)"],
    )
    events = await events_until(client, finished(run["run"]))
    read, status = [e for e in events if e["type"] == "tool.finished"]
    assert read["is_error"] and "THE SECRET" not in read["result"] and "rule deny read(./secret.txt)" in read["result"]
    assert "rule deny" not in status["result"]  # it ran (outside a repository git says so)
    assert not [e for e in events if e["type"] == "permission.requested"]


@pytest.mark.parametrize("rule", ["WebSearch(query)", "Foo(bar)", "WebFetch(https://x.com)"])
async def test_a_rule_roost_cannot_use_is_refused_by_name(client: TrioClient, project: Path, rule: str) -> None:
    model = write_script(project, [text("done")])
    with pytest.raises(RpcError) as caught:
        await client.call("dispatch", task="t", model=model, cwd=str(project), deny=[rule])
    assert caught.value.code == ErrorCode.INVALID_PARAMS and rule in caught.value.message


async def test_a_projects_claude_settings_deny_and_ask_apply_its_allow_waits_for_trust(client: TrioClient, project: Path) -> None:
    (project / "secret.txt").write_text("THE SECRET\n")
    (project / "keep.txt").write_text("keep\n")
    (project / ".claude").mkdir()
    settings = {"permissions": {
        "deny": ["Read(./secret.txt)", "Bash(rm:*)", "WebSearch"],
        "allow": ["Bash(cat:*)", "WebSearch"],
    }}
    (project / ".claude" / "settings.json").write_text(json.dumps(settings))
    steps = [[_read("secret.txt")], [bash("rm -f keep.txt")], [bash("cat keep.txt")]]
    model = write_script(project, *steps, [text("done")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True, mode="full")
    events = await events_until(client, finished(run["run"]))
    read, removed, cat = [e for e in events if e["type"] == "tool.finished"]
    assert read["is_error"] and "THE SECRET" not in read["result"]
    assert removed["is_error"] and (project / "keep.txt").exists()
    untrusted = next(e for e in events if e["type"] == "project.untrusted")
    assert {"kind": "allow rule", "name": "bash(cat:*)"}.items() <= untrusted["ignored"][0].items()
    # In agent mode the untrusted allow rule does not allow: cat asks.
    model = write_script(project, [bash("cat keep.txt")], [text("done")], name="again.json")
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    asked = await events_until(client, lambda e: e["type"] == "permission.requested")
    assert "cat keep.txt" in json.dumps(asked[-1]["input"])
    await client.call("permission.respond", session=run["session"], call_id=asked[-1]["call_id"], decision="deny")
    await events_until(client, finished(run["run"]))


async def test_the_users_claude_settings_rules_apply(client: TrioClient, project: Path) -> None:
    (project / "secret.txt").write_text("THE SECRET\n")
    user = Path(os.environ["HOME"]) / ".claude"
    user.mkdir()
    (user / "settings.json").write_text(json.dumps({"permissions": {"deny": ["Read(secret.txt)"], "allow": ["Bash(cat:*)"]}}))
    model = write_script(project, [_read("secret.txt")], [bash("cat secret.txt")], [text("done")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]))
    read, cat = [e for e in events if e["type"] == "tool.finished"]
    assert read["is_error"] and "THE SECRET" not in read["result"]
    assert not [e for e in events if e["type"] == "permission.requested"]


async def test_default_mode_and_additional_directories_of_claude_settings(
    client: TrioClient, project: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "notes.md").write_text("SHARED NOTES\n")
    (project / ".claude").mkdir()
    settings = project / ".claude" / "settings.json"
    settings.write_text(json.dumps({"permissions": {"defaultMode": "acceptEdits", "additionalDirectories": [str(shared)]}}))
    steps = [[{"type": "tool_use", "name": "write", "input": {"path": "made.txt", "content": "x"}}],
             [_read(str(shared / "notes.md"))]]

    async def run_it(name: str) -> list[dict]:
        model = write_script(project, *steps, [text("done")], name=name)
        run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
        seen = []
        while True:
            events = await events_until(client, lambda e: e["type"] in ("permission.requested", "run.finished"))
            seen += events
            if events[-1]["type"] == "run.finished":
                return seen
            await client.call("permission.respond", session=run["session"], call_id=events[-1]["call_id"], decision="deny")

    # Untrusted: neither widens: the write and the read outside ask (and are denied).
    seen = await run_it("a.json")
    assert [e["tool"] for e in seen if e["type"] == "permission.requested"] == ["write", "read"]
    assert {i["kind"] for i in next(e for e in seen if e["type"] == "project.untrusted")["ignored"]} == {"allow rule", "default mode"}
    await trust(client, project)
    seen = await run_it("b.json")
    assert not [e for e in seen if e["type"] == "permission.requested"]
    assert (project / "made.txt").read_text() == "x" and "SHARED NOTES" in json.dumps(seen)
    # A project's plan narrows whether trusted or not; bypassPermissions waits for trust.
    settings.write_text(json.dumps({"permissions": {"defaultMode": "plan"}}))
    model = write_script(project, [text("the plan")], name="c.json")
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    assert next(e for e in await events_until(client, finished(run["run"])) if e["type"] == "run.started")["mode"] == "plan"
    settings.write_text(json.dumps({"permissions": {"defaultMode": "bypassPermissions"}}))
    model = write_script(project, [text("done")], name="d.json")
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    events = await events_until(client, finished(run["run"]))
    assert next(e for e in events if e["type"] == "run.started")["mode"] == "agent"
    assert ("default mode", "full") in {(i["kind"], i["name"]) for i in next(e for e in events if e["type"] == "project.untrusted")["ignored"]}
