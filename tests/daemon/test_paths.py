"""Paths a call touches are judged where they really lead (symlinks, ``..``, ``//``,
``/proc/self/root``), through a real daemon on real files; HOME is the test's own folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from roost.daemon.tools import ToolContext, ToolRegistry
from roost.protocol.trio_client import TrioClient

from .conftest import bash, events_until, text, write_script

SECRET = "ssh-private-key-material"


@pytest.fixture
def ssh(project: Path) -> Path:
    """~/.ssh/id with a secret, a link to it in the project (``notes``), and a link to the
    folder (``keys``)."""
    folder = Path(os.environ["HOME"]) / ".ssh"
    folder.mkdir()
    (folder / "id").write_text(f"{SECRET}\n")
    (project / "notes").symlink_to(folder / "id")
    (project / "keys").symlink_to(folder)
    return folder / "id"


def call(name: str, **input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": input}


async def run_calls(client: TrioClient, project: Path, *calls: dict[str, Any], **dispatch: Any) -> list[dict[str, Any]]:
    """One reply making ``calls``; the run's events (requests left open are denied)."""
    # The script lies outside the project: it holds the patterns searched for.
    model = write_script(project.parent, list(calls), [text("done")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True, **dispatch)
    events: list[dict[str, Any]] = []
    while True:
        events += await events_until(
            client, lambda e: e.get("type") in ("permission.requested", "run.finished") and e.get("run") == run["run"]
        )
        if events[-1]["type"] == "run.finished":
            return events
        await client.call("permission.respond", session=run["session"], call_id=events[-1]["call_id"], decision="deny")


def results(events: list[dict[str, Any]]) -> list[str]:
    order = [e["call_id"] for e in events if e["type"] == "tool.started"]
    by_call = {e["call_id"]: e["result"] for e in events if e["type"] == "tool.finished"}
    return [by_call[c] for c in order]


@pytest.mark.parametrize("mode", ["agent", "full"])
async def test_grep_and_glob_never_follow_a_link_out_under_a_read_deny_rule(
    client: TrioClient, project: Path, ssh: Path, mode: str
) -> None:
    events = await run_calls(
        client, project, call("grep", pattern="ssh-private"), call("glob", pattern="**"),
        mode=mode, deny=["read(~/.ssh/**)"],
    )
    grep, glob = results(events)
    assert SECRET not in grep and grep == "no matches for ssh-private"
    assert "notes" not in glob.split("\n") and "a.txt" in glob.split("\n")
    assert not [e for e in events if e["type"] == "permission.requested"]


async def test_a_link_out_is_followed_only_where_a_read_would_be_allowed(
    client: TrioClient, project: Path, ssh: Path
) -> None:
    # agent mode: reading outside the project would ask, so the walk skips the link.
    [grep] = results(await run_calls(client, project, call("grep", pattern="ssh-private")))
    assert grep == "no matches for ssh-private"
    # full mode with no deny rule: reading it would be allowed, so the walk follows it.
    [grep] = results(await run_calls(client, project, call("grep", pattern="ssh-private"), mode="full"))
    assert grep == f"notes:1:{SECRET}"


@pytest.mark.parametrize(
    "path",
    ["notes", "keys/id", "a/../notes", "//{home}/.ssh/id", "/proc/self/root{home}/.ssh/id", "{home}//.ssh/./id",
     "~/.ssh/id", "../home/.ssh/id"],
)
async def test_every_spelling_of_a_denied_path_is_denied(client: TrioClient, project: Path, ssh: Path, path: str) -> None:
    path = path.format(home=os.environ["HOME"])
    events = await run_calls(client, project, call("read", path=path), call("grep", pattern="x", path=path),
                             mode="full", deny=["read(~/.ssh/**)"])
    for result in results(events):
        assert result.startswith("permission denied: ") and "rule deny read(~/.ssh/**)" in result, result


async def test_a_write_through_a_link_out_asks_even_where_an_allow_rule_names_it(
    client: TrioClient, project: Path, tmp_path: Path
) -> None:
    (project / "src").mkdir()
    (project / "src" / "out").symlink_to(tmp_path / "outside.txt")
    bashrc = Path(os.environ["HOME"]) / ".bashrc"
    (project / "rc").symlink_to(bashrc)
    events = await run_calls(
        client, project, call("write", path="src/out", content="x"), call("write", path="src/in.txt", content="y"),
        bash("echo hi > rc"), allow=["write(src/**)", "bash(echo *)"],
    )
    asked = [e for e in events if e["type"] == "permission.requested"]
    assert [(a["tool"], a["outside"]) for a in asked] == [("write", True), ("bash", True)]
    assert asked[0]["reason"] == f"{project}/src/out (which is {tmp_path / 'outside.txt'}) is outside the working directory"
    assert asked[0]["session_rules"] == [f"write({tmp_path / 'outside.txt'})"]
    assert asked[1]["session_rules"] == [f"write({bashrc})"]
    assert not (tmp_path / "outside.txt").exists() and not bashrc.exists()
    assert (project / "src" / "in.txt").read_text() == "y"


async def test_the_tools_skip_links_out_without_a_policy(project: Path, ssh: Path) -> None:
    tools = ToolRegistry()
    ctx = ToolContext(str(project))
    grep = await tools.call("grep", {"pattern": "ssh-private"}, ctx)
    assert grep.text == "no matches for ssh-private"
    (project / "inner").symlink_to(project / "a.txt")
    glob = await tools.call("glob", {"pattern": "*"}, ctx)
    assert "inner" in glob.text.split("\n") and "notes" not in glob.text.split("\n")
    denied = ToolContext(str(project), outside_ok=True, read_permission=lambda path: "deny" if ".ssh" in path else "allow")
    read = await tools.call("read", {"path": "notes"}, denied)
    assert read.is_error and "which the rules deny reading" in read.text
