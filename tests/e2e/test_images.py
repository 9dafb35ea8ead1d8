"""``roost dispatch --image FILE``: the file read by the CLI, sent with the task, shown as
``[image WxH, N KB]``, and given to the model as an image; over the cap, refused at once.
An editor's image over ACP, and an Agent SDK host's over stream-json, go the same way."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import subprocess

import acp
from acp import schema
from PIL import Image

from tests.fakes.anthropic_server import serve_anthropic

from .conftest import E2E, ROOST
from .test_acp import Editor


def test_dispatch_sends_an_image_file_with_the_task(e2e: E2E) -> None:
    out = io.BytesIO()
    Image.new("RGB", (64, 48), (10, 120, 30)).save(out, "PNG")
    (e2e.tmp / "shot.png").write_bytes(out.getvalue())
    reply = {"content": [{"type": "text", "text": "Green."}], "usage": {"input_tokens": 10, "output_tokens": 1}}
    with serve_anthropic([reply]) as server:
        env = dict(e2e.env, ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=server.base_url)
        done = e2e.roost("dispatch", "what colour?", "--image", str(e2e.tmp / "shot.png"),
                         "--model", "anthropic/claude-test", env=env)
        assert done.returncode == 0, done.stderr
        [request] = server.requests
    lines = done.stdout.splitlines()
    assert "  [image 64x48, 1 KB]" in lines
    text, image = request.body["messages"][0]["content"]
    assert text["text"].startswith("what colour?")
    assert image["source"]["data"] == base64.b64encode(out.getvalue()).decode()


def test_an_image_over_the_cap_is_refused_before_anything_is_sent(e2e: E2E) -> None:
    (e2e.tmp / "huge.png").write_bytes(b"\0" * (13 * 2**20))
    done = e2e.roost("dispatch", "look", "--image", str(e2e.tmp / "huge.png"), "--model", "scripted/demo")
    assert done.returncode == 2
    assert "the images are 13.0 MiB in all; a dispatch carries at most 12 MiB" in done.stderr


def test_an_editors_image_goes_with_the_prompt_over_acp(e2e: E2E) -> None:
    out = io.BytesIO()
    Image.new("RGB", (16, 9), (200, 0, 0)).save(out, "PNG")
    data = base64.b64encode(out.getvalue()).decode()

    async def scenario(env: dict[str, str]) -> schema.PromptResponse:
        async with acp.spawn_agent_process(Editor(answer=None), ROOST, "acp", env=env, cwd=str(e2e.project)) as (conn, _):
            started = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            assert started.agent_capabilities.prompt_capabilities.image is True
            sid = (await conn.new_session(cwd=str(e2e.project), mcp_servers=[])).session_id
            image = schema.ImageContentBlock(type="image", data=data, mime_type="image/png")
            return await conn.prompt(session_id=sid, prompt=[acp.text_block("what is this?"), image])

    reply = {"content": [{"type": "text", "text": "Red."}], "usage": {"input_tokens": 10, "output_tokens": 1}}
    with serve_anthropic([reply]) as server:
        env = dict(e2e.env, ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=server.base_url, ROOST_MODEL="anthropic/claude-test")
        assert asyncio.run(scenario(env)).stop_reason == "end_turn"
        [request] = server.requests
    text, image = request.body["messages"][0]["content"]
    assert text["text"].startswith("what is this?")
    assert image["source"] == {"type": "base64", "media_type": "image/png", "data": data}


def test_an_agent_sdk_hosts_image_goes_with_the_task(e2e: E2E) -> None:
    out = io.BytesIO()
    Image.new("RGB", (5, 4), (0, 0, 255)).save(out, "PNG")
    data = base64.b64encode(out.getvalue()).decode()
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    message = {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "colour?"}, image]}}
    reply = {"content": [{"type": "text", "text": "Blue."}], "usage": {"input_tokens": 10, "output_tokens": 1}}
    with serve_anthropic([reply]) as server:
        env = dict(e2e.env, ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=server.base_url)
        done = subprocess.run(
            [ROOST, "dispatch", "--input-format", "stream-json", "--output-format", "stream-json",
             "--model", "anthropic/claude-test"],
            cwd=e2e.project, env=env, input=json.dumps(message) + "\n", capture_output=True, text=True, timeout=20,
        )
        assert done.returncode == 0, done.stderr
        [request] = server.requests
    sent = request.body["messages"][0]["content"]
    assert sent[0]["text"].startswith("colour?") and sent[1]["source"]["data"] == data
