"""Images a task carries: sent by the client with the dispatch (``images``), or named in
the task as ``@file.png``; read under the read rules, checked, stored once, sent to the
model after the task's text. Steering carries them the same way; a PDF named in a task
goes whole, as a document."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest

from roost.daemon.folder._project import user_config_file
from roost.protocol import DISPATCH_IMAGE_BYTES, ErrorCode, RpcError
from roost.protocol.trio_client import TrioClient
from tests.fakes.anthropic_server import serve_anthropic

from .conftest import events_until, finished, stored
from .test_media import png, text_pdf

DONE = {"content": [{"type": "text", "text": "seen"}], "stop_reason": "end_turn", "usage": {"input_tokens": 5, "output_tokens": 1}}


async def dispatch(client: TrioClient, project: Path, task: str, **params: Any) -> list[dict[str, Any]]:
    run = await client.call("dispatch", yes=True, task=task, model="anthropic/claude-test", cwd=str(project), attach=True, **params)
    return await events_until(client, finished(run["run"]))


def first_message(anthropic: Any) -> list[dict[str, Any]]:
    return anthropic.requests[-1].body["messages"][0]["content"]


async def test_images_sent_with_a_dispatch_follow_the_task(client: TrioClient, project: Path, anthropic: Any) -> None:
    shot, logo = png(40, 30), png(12, 12, (0, 0, 0))
    events = await dispatch(client, project, "compare these", images=[{"name": "shot.png", "data": shot}, {"name": "logo.png", "data": logo}])

    task = next(e for e in stored(events) if e["type"] == "message.user")
    assert [p["sha256"] for p in task["parts"]] == [hashlib.sha256(shot).hexdigest(), hashlib.sha256(logo).hexdigest()]
    assert '<image path="shot.png">image 40x30, 1 KB, sent after this message</image>' in task["text"]
    text, first, second = first_message(anthropic)
    assert text["text"].startswith("compare these")
    assert first == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(shot).decode()}}
    assert second["source"]["data"] == base64.b64encode(logo).decode()


async def test_an_image_named_in_the_task_is_attached_under_the_read_rules(
    client: TrioClient, project: Path, anthropic: Any, tmp_path: Path
) -> None:
    (project / "shot.png").write_bytes(png(20, 10))
    (project / "secret").mkdir()
    (project / "secret" / "plan.png").write_bytes(png(5, 5))
    (tmp_path / "elsewhere.png").write_bytes(png(6, 6))
    (project / "link.png").symlink_to(tmp_path / "elsewhere.png")
    config = user_config_file()
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[permissions]\ndeny = ["read(secret/**)"]\n')

    events = await dispatch(client, project, "look at @shot.png, @secret/plan.png and @link.png")

    task = next(e for e in stored(events) if e["type"] == "message.user")
    (part,) = task["parts"]
    assert (part["width"], part["height"]) == (20, 10)
    assert '<file path="secret/plan.png">not attached: ' in task["text"]
    assert '<file path="link.png">not attached: ' in task["text"]
    assert [b["type"] for b in first_message(anthropic)] == ["text", "image"]


async def test_an_image_a_custom_command_names_is_attached(client: TrioClient, project: Path, anthropic: Any) -> None:
    (project / "shot.png").write_bytes(png(3, 2))
    commands = project / ".claude" / "commands"
    commands.mkdir(parents=True)
    (commands / "look.md").write_text("Describe @shot.png in $ARGUMENTS words.\n")

    events = await dispatch(client, project, "/look five")

    task = next(e for e in stored(events) if e["type"] == "message.user")
    assert task["text"].startswith("Describe @shot.png in five words.")
    assert [(p["width"], p["height"]) for p in task["parts"]] == [(3, 2)]
    assert [b["type"] for b in first_message(anthropic)] == ["text", "image"]


async def test_a_pdf_named_in_the_task_goes_whole_as_a_document(client: TrioClient, project: Path, anthropic: Any) -> None:
    pdf = text_pdf("Quarterly numbers")
    (project / "report.pdf").write_bytes(pdf)
    (project / "broken.pdf").write_bytes(pdf[:50])

    events = await dispatch(client, project, "summarize @report.pdf and @broken.pdf")

    task = next(e for e in stored(events) if e["type"] == "message.user")
    (part,) = task["parts"]
    assert (part["type"], part["media_type"], part["bytes"]) == ("document", "application/pdf", len(pdf))
    assert '<document path="report.pdf">document: application/pdf, 1 KB, sent after this message</document>' in task["text"]
    assert '<file path="broken.pdf">not attached: not a readable PDF' in task["text"]
    # (The last block carries the cache breakpoint.)
    document = {k: v for k, v in first_message(anthropic)[1].items() if k != "cache_control"}
    assert document == {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                        "data": base64.b64encode(pdf).decode()}}


@pytest.mark.parametrize(
    ("images", "error"),
    [
        ([{"name": "big.png", "data": b"\0" * (DISPATCH_IMAGE_BYTES + 1)}], "over the 12,288 KB a dispatch carries"),
        ([{"name": "notes.txt", "data": b"just text"}], "image notes.txt: not a PNG, JPEG, GIF or WebP image"),
        ([{"name": "x.png", "data": "text, not bytes"}], "images must be a list of {name, data: bytes}"),
    ],
    ids=["too-large", "not-an-image", "not-bytes"],
)
async def test_images_that_cannot_be_sent_refuse_the_dispatch(
    client: TrioClient, project: Path, anthropic: Any, images: list[dict[str, Any]], error: str
) -> None:
    with pytest.raises(RpcError) as caught:
        await client.call("dispatch", yes=True, task="t", model="anthropic/claude-test", cwd=str(project), images=images)
    assert caught.value.code == ErrorCode.INVALID_PARAMS and error in caught.value.message
    assert not anthropic.requests


async def test_steering_carries_images_to_the_next_model_call(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    picture = png(9, 7)
    script = [
        {"content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "sleep 1"}}],
         "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}},
        DONE,
    ]
    with serve_anthropic(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        run = await client.call(
            "dispatch", yes=True, task="wait", model="anthropic/claude-test", cwd=str(project), attach=True, sandbox="off"
        )
        await events_until(client, lambda e: e["type"] == "tool.started")
        await client.call("steer", session=run["session"], text="and this", images=[{"name": "p.png", "data": picture}])
        events = await events_until(client, finished(run["run"]))
        bodies = [r.body for r in server.requests]

    steered = next(e for e in stored(events) if e["type"] == "message.user" and e.get("origin") == "steer")
    assert steered["parts"][0]["sha256"] == hashlib.sha256(picture).hexdigest()
    last = bodies[1]["messages"][-1]["content"]
    assert [b["type"] for b in last] == ["tool_result", "text", "image"]
    assert last[2]["source"]["data"] == base64.b64encode(picture).decode()
