"""An MCP tool's image reaches the model as an image (server-everything's get-tiny-image,
through a real daemon and a fake Messages API that records what it is sent)."""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path

import pytest
from PIL import Image

from roost.protocol.trio_client import TrioClient
from tests.fakes.anthropic_server import serve_anthropic

from ..conftest import events_until, finished, stored, user_dir, write
from .conftest import EVERYTHING_JS, everything


async def test_an_mcp_tools_image_is_an_image_block_in_its_tool_result(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    everything()
    write(user_dir() / "config.toml", f'[mcp.servers.ev]\ncommand = "node"\nargs = ["{EVERYTHING_JS}", "stdio"]\n')
    script = [
        {"content": [{"type": "tool_use", "id": "toolu_1", "name": "ev__get-tiny-image", "input": {}}],
         "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}},
        {"content": [{"type": "text", "text": "a logo"}], "stop_reason": "end_turn",
         "usage": {"input_tokens": 20, "output_tokens": 2}},
    ]
    with serve_anthropic(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        run = await client.call(
            "dispatch", yes=True, task="show", model="anthropic/claude-test", cwd=str(project), attach=True, env=dict(os.environ)
        )
        events = await events_until(client, finished(run["run"]), timeout=60)
        bodies = [r.body for r in server.requests]

    assert events[-1]["reason"] == "done", events[-1]
    result = next(e for e in stored(events) if e["type"] == "tool.finished")
    (part,) = result["parts"]
    assert (part["type"], part["media_type"], part["width"], part["height"]) == ("image", "image/png", 20, 20)
    assert "[image 20x20, " in result["result"] and "images" not in result.get("meta", {})
    content = bodies[1]["messages"][2]["content"][0]["content"]
    image = next(b for b in content if b["type"] == "image")
    assert image["source"]["media_type"] == "image/png"
    with Image.open(io.BytesIO(base64.b64decode(image["source"]["data"]))) as sent:
        assert sent.size == (20, 20)
