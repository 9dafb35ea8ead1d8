"""A configured OpenAI-compatible provider (no key, like a local server) through the daemon."""

from __future__ import annotations

from pathlib import Path

import pytest

from roost.daemon.folder._project import user_config_file
from roost.protocol.trio_client import TrioClient
from tests.fakes.openai_server import serve_openai

from .conftest import events_until, finished, stored


async def test_a_tool_loop_against_a_local_openai_compatible_server(
    client: TrioClient, project: Path
) -> None:
    script = [
        {
            "content": "Looking.",
            "tool_calls": [{"id": "call_1", "name": "bash", "arguments": {"command": "ls"}}],
            "usage": {"prompt_tokens": 100, "completion_tokens": 10},
        },
        {"content": "Three files.", "usage": {"prompt_tokens": 150, "completion_tokens": 5}},
    ]
    with serve_openai(script) as server:
        config = user_config_file()
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(
            "[providers.local]\n"
            f'kind = "openai"\nbase_url = "{server.base_url}"\napi_key_env = ""\n'
            'models = { small = "qwen3:8b" }\n'
            '[prices."local/qwen3:8b"]\ninput = 1.0\noutput = 2.0\n'
        )
        run = await client.call("dispatch", yes=True, task="count", model="local/small", cwd=str(project), attach=True)
        assert run["model"] == "local/qwen3:8b"
        events = await events_until(client, finished(run["run"]))
        bodies = [r.body for r in server.requests]
        assert server.connections == 1

    assert "".join(e["text"] for e in events if e["type"] == "text.delta") == "Looking.Three files."
    tool = next(e for e in events if e["type"] == "tool.finished")
    assert tool["call_id"] == "call_1" and tool["result"].split() == ["a.txt", "b.txt", "c.py"]
    last = events[-1]
    assert (last["reason"], last["text"]) == ("done", "Three files.")
    assert last["usage"] == {"input_tokens": 250, "output_tokens": 15}
    assert last["cost"] == pytest.approx((250 * 1.0 + 15 * 2.0) / 1_000_000)
    started = next(e for e in stored(events) if e["type"] == "run.started")
    assert started["model"] == "local/qwen3:8b"
    assert bodies[0]["model"] == "qwen3:8b" and bodies[0]["stream"] is True
    second = bodies[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
    assert second[3]["tool_call_id"] == "call_1"
