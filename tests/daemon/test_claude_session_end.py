"""Claude Code's SessionEnd hooks through a real daemon: a session ends when it is pruned
(reason ``other``) or when a shell leaves it saying why (``detach`` with a reason); never
one that has had no run, nor one whose run goes on; a project's hooks only when trusted,
in a sandbox; a prune waits for them no longer than Claude Code's budget."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient

from roost.daemon._paths import state_dir

from .conftest import bash, events_until, text, trust, write_script
from .test_claude_hooks import group, run, script, settings
from .test_sandbox import INSIDE

#: A SessionEnd hook: what it was given, how many lines its transcript had then, and
#: whether it ran in a sandbox.
END = f"""\
import json, os, subprocess, sys
payload = json.load(sys.stdin)
with open(payload["transcript_path"]) as transcript:
    payload["transcript_lines"] = len(transcript.readlines())
payload["inside"] = subprocess.run({INSIDE!r}, shell=True).returncode == 0
with open("ended.jsonl", "a") as log:
    log.write(json.dumps(payload) + "\\n")
"""


@pytest.fixture(autouse=True)
def _budget(monkeypatch: pytest.MonkeyPatch) -> None:
    # Room for a sandboxed Python on a busy machine (Claude Code's default is 1.5 s).
    monkeypatch.setenv("CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS", "20000")


def ended(project: Path) -> list[dict[str, Any]]:
    path = project / "ended.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def until_ended(project: Path, count: int) -> list[dict[str, Any]]:
    with trio.fail_after(20):
        while len(ended(project)) < count:
            await trio.sleep(0.05)
    return ended(project)


async def test_a_pruned_session_ends_first_with_reason_other(client: TrioClient, project: Path) -> None:
    settings(project, {"SessionEnd": [group(script(project, "end.py", END))]})
    await trust(client, project)
    events = await run(client, project, [text("one")])
    session = events[0]["session"]
    idle = (await client.call("sessions.create", cwd=str(project)))["session"]
    pruned = await client.call("sessions.prune", older_than=0, sessions=[session, idle])
    assert {s["id"] for s in pruned["sessions"]} == {session, idle}
    # Only the session that had a run ended; its hook read its transcript before it went.
    [end] = ended(project)
    assert end["hook_event_name"] == "SessionEnd" and end["reason"] == "other"
    assert end["session_id"] == session and end["cwd"] == str(project)
    assert end["transcript_lines"] >= 2 and end["transcript_path"].endswith(f"{session}.jsonl")
    assert not (state_dir() / "transcripts" / f"{session}.jsonl").exists()
    assert end["inside"] == (shutil.which("bwrap") is not None)


async def test_an_untrusted_projects_session_end_hooks_never_run(client: TrioClient, project: Path) -> None:
    settings(project, {"SessionEnd": [group("touch ended")]})
    events = await run(client, project, [text("one")])
    await client.call("sessions.prune", older_than=0, sessions=[events[0]["session"]])
    await client.call("detach", session=events[0]["session"], reason="clear")
    await trio.sleep(0.5)
    assert not (project / "ended").exists()


async def test_a_hook_holds_a_prune_no_longer_than_the_budget(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings(project, {"SessionEnd": [group("sleep 30", "other")]})
    await trust(client, project)
    events = await run(client, project, [text("one")])
    monkeypatch.setenv("CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS", "300")
    began = trio.current_time()
    pruned = await client.call("sessions.prune", older_than=0, sessions=[events[0]["session"]])
    assert [s["id"] for s in pruned["sessions"]] == [events[0]["session"]]
    assert trio.current_time() - began < 5


async def test_a_shell_that_leaves_says_why_and_the_matching_hooks_run(client: TrioClient, project: Path) -> None:
    hook = script(project, "end.py", END)
    settings(project, {"SessionEnd": [group(hook, "clear|prompt_input_exit"), group("touch resumed", "resume")]})
    await trust(client, project)
    events = await run(client, project, [text("one")])
    session = events[0]["session"]
    await client.call("detach", session=session, reason="clear")
    [end] = await until_ended(project, 1)
    assert end["reason"] == "clear" and end["session_id"] == session and end["hook_event_name"] == "SessionEnd"
    assert not (project / "resumed").exists()
    # A session that has had no run has not begun: it does not end.
    fresh = (await client.call("sessions.create", cwd=str(project)))["session"]
    await client.call("detach", session=fresh, reason="prompt_input_exit")
    # Plain detaching (a client that follows a session) ends nothing.
    await client.call("detach", session=session)
    await client.call("detach", session=session, reason="prompt_input_exit")
    assert [e["reason"] for e in await until_ended(project, 2)] == ["clear", "prompt_input_exit"]
    await trio.sleep(0.3)
    assert len(ended(project)) == 2
    with pytest.raises(RpcError) as info:
        await client.call("detach", session=session, reason="bored")
    assert info.value.code == ErrorCode.INVALID_PARAMS and "prompt_input_exit" in info.value.message


async def test_a_session_whose_run_goes_on_does_not_end(client: TrioClient, project: Path) -> None:
    settings(project, {"SessionEnd": [group("touch ended")]})
    await trust(client, project)
    first = await run(client, project, [text("one")])
    session = first[0]["session"]
    # A scripted model answers by the replies in the session so far: the first is done.
    model = write_script(project, [text("one")], [bash("touch made")], [text("done")], name="waits.json")
    started = await client.call("dispatch", task="t", session=session, model=model, cwd=str(project), attach=True)
    await events_until(client, lambda e: e.get("type") == "permission.requested")
    await client.call("detach", session=session, reason="prompt_input_exit")
    await trio.sleep(0.5)
    assert not (project / "ended").exists()
    await client.call("abort", session=session)
    assert started["session"] == session
