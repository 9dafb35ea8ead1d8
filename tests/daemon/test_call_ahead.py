"""A step's model call leaves while the step's events are being stored; nothing it brings back
is shown or fed before they are stored and published, and a step whose events cannot be
stored shows nothing of its call.

The commit is held up for real: the test takes the database's write lock from a connection
of its own (``BEGIN IMMEDIATE``), as another writer would, and the daemon's writer waits for
it (SQLite's busy timeout).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio

from roost.daemon.rpc._server import Daemon
from roost.daemon.runs._model_calls import HELD_APART, CallAhead
from roost.loop import SessionState
from roost.protocol import ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient, open_client
from tests._disk import fill
from tests.fakes.anthropic_server import serve_anthropic

from .conftest import events_until, finished, serving, text, write_script


async def _arrived(client: TrioClient, seconds: float) -> list[dict[str, Any]]:
    """The events that reach ``client`` within ``seconds``."""
    seen: list[dict[str, Any]] = []
    with trio.move_on_after(seconds):
        async for note in client.notifications:
            if note.method == "event":
                seen.append(note.params[0])
    return seen


async def test_the_next_request_leaves_while_the_step_is_stored_and_its_reply_shows_after(
    daemon: Daemon, client: TrioClient, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = [
        {
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash",
                         "input": {"command": "while [ ! -e go ]; do sleep 0.02; done"}}],
            "stop_reason": "tool_use",
        },
        {"content": [{"type": "text", "deltas": ["all ", "done"]}]},
    ]
    with serve_anthropic(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-sentinel")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        run = await client.call("dispatch", yes=True, task="t", cwd=str(project), sandbox="off",
                                model="anthropic/claude-sonnet-4-5", attach=True)
        await events_until(client, lambda e: e["type"] == "tool.started")
        lock = sqlite3.connect(tmp_path / "roost.db", isolation_level=None)
        try:
            lock.execute("BEGIN IMMEDIATE")  # the tool's result cannot be committed now
            (project / "go").touch()
            with trio.fail_after(4):
                while len(server.requests) < 2:
                    await trio.sleep(0.01)
            # The next request left; nothing of the step was shown: its events are not stored.
            assert await _arrived(client, 0.2) == []
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        events = await events_until(client, finished(run["run"]))
    types = [e["type"] for e in events]
    assert events[-1]["reason"] == "done" and events[-1]["text"] == "all done"
    second = types.index("step.started")
    assert types[:second] == ["tool.finished", "step.finished"]
    # The deltas that came while the step was stored are shown after it.
    assert [e["text"] for e in events if e["type"] == "text.delta"] == ["all ", "done"]
    assert types.index("text.delta") > second and events[second]["seq"] == events[1]["seq"] + 1


async def test_a_call_whose_step_cannot_be_stored_shows_nothing(small_disk: Path, project: Path) -> None:
    db = small_disk / "roost.db"
    big = os.urandom(350 << 10).hex()
    async with serving(db) as daemon, open_client(daemon.socket_path) as client:
        first = await client.call("dispatch", yes=True, task="t", cwd=str(project), attach=True,
                                  model=write_script(project, [text("fine")], name="a.json"))
        await events_until(client, finished(first["run"]))
        session = first["session"]
        # The scripted model answers by the replies so far in the session: one.
        refused_model = write_script(project, [text("fine")], [text("never shown")], name="b.json")
        model = write_script(project, [text("fine")], [text("shown")], name="c.json")
        async with open_client(daemon.socket_path) as watcher:
            await watcher.call("attach", session=session)
            filler = fill(small_disk, leave=100 << 10)
            # The run's first events (its task among them) cannot be stored: it never starts,
            # and the call its first step began is ended unseen.
            with pytest.raises(RpcError) as refused:
                await client.call("dispatch", yes=True, task=big, session=session, model=refused_model)
            assert refused.value.code == ErrorCode.STORE_FULL
            filler.unlink()
            again = await client.call("dispatch", yes=True, task="t", session=session, model=model)
            seen = await events_until(watcher, finished(again["run"]))
    # Replayed on attach: the first run's; then only the last run's.
    replies = [e for e in seen if e["type"] in ("text.delta", "message.assistant") and e["run"] != first["run"]]
    assert replies and all(e["run"] == again["run"] for e in replies)
    assert "never shown" not in str(seen)


def test_a_flood_of_deltas_before_the_step_is_stored_goes_out_as_a_bounded_burst() -> None:
    ahead = CallAhead(SessionState("s"))
    words = [f"w{i} " for i in range(200_000)]
    for word in words:
        ahead.hold({"type": "text.delta", "text": word})
    published: list[dict[str, Any]] = []
    ahead.release(published.append)
    assert len(published) == HELD_APART and "".join(d["text"] for d in published) == "".join(words)
    assert [d["text"] for d in published[:3]] == ["w0 ", "w1 ", "w2 "]
    assert ahead.stored.is_set() and ahead.held == []
