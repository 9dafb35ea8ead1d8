"""Claude Code hooks beyond the tool calls, through a real daemon: the session's transcript
gone with the session, SessionEnd, Notification and PreCompact, ``if`` and ``async``."""

from __future__ import annotations

from pathlib import Path

from roost.protocol.trio_client import TrioClient

from roost.daemon._paths import state_dir

from .conftest import text
from .test_claude_hooks import run, written


async def test_a_deleted_sessions_transcript_goes_with_it(client: TrioClient, project: Path) -> None:
    events = await run(client, project, [text("one")])
    session = events[0]["session"]
    path = state_dir() / "transcripts" / f"{session}.jsonl"
    await written(path, 2)
    (path.with_suffix("") / "subagents").mkdir(parents=True, exist_ok=True)
    other = await run(client, project, [text("two")])
    kept = state_dir() / "transcripts" / f"{other[0]['session']}.jsonl"
    await written(kept, 2)
    pruned = await client.call("sessions.prune", older_than=0, sessions=[session])
    assert [s["id"] for s in pruned["sessions"]] == [session]
    assert not path.exists() and not path.with_suffix("").exists()
    assert kept.exists()
