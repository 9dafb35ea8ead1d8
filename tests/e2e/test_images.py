"""``roost dispatch --image FILE``: the file read by the CLI, sent with the task, shown as
``[image WxH, N KB]``, and given to the model as an image; over the cap, refused at once."""

from __future__ import annotations

import base64
import io

from PIL import Image

from tests.fakes.anthropic_server import serve_anthropic

from .conftest import E2E


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
