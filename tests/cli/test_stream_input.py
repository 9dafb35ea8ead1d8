"""``--input-format stream-json``: the task read as an Agent SDK host writes it, its control
requests answered (initialize with success, others with an error naming them)."""

from __future__ import annotations

import base64
import json

import pytest

from roost.cli._stream_input import StreamInputError, read_task


def test_the_first_user_message_is_the_task_and_control_requests_are_answered() -> None:
    written: list[str] = []
    lines = [
        json.dumps({"request_id": "a1", "type": "control_request", "request": {"subtype": "initialize", "systemPrompt": [""]}}),
        "",
        json.dumps({"request_id": "a2", "type": "control_request", "request": {"subtype": "set_model", "model": "x"}}),
        json.dumps({"type": "user", "session_id": "", "parent_tool_use_id": None,
                    "message": {"role": "user", "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]}}),
        "never read",
    ]
    assert read_task(iter(lines), written.append) == ("one\n\ntwo", [])
    first, second = [json.loads(line) for line in written]
    assert first["type"] == "control_response" and first["response"]["subtype"] == "success"
    assert first["response"]["request_id"] == "a1" and first["response"]["response"]["commands"] == []
    assert second["response"] == {"request_id": "a2", "subtype": "error", "error": "roost does not answer 'set_model' control requests"}
    assert read_task(iter([json.dumps({"type": "user", "message": {"role": "user", "content": "plain"}})]), written.append) == ("plain", [])


def test_the_user_messages_images_go_with_the_task() -> None:
    png = b"\x89PNG\r\n\x1a\n pretend"
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(png).decode()}}
    url = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    message = {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "what is it?"}, image, url]}}
    assert read_task(iter([json.dumps(message)]), lambda line: None) == ("what is it?", [{"name": "image 1", "data": png}])
    broken = {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": "t"},
                                                                      {**image, "source": {**image["source"], "data": "not base64!"}}]}}
    with pytest.raises(StreamInputError, match="an image's data is not base64"):
        read_task(iter([json.dumps(broken)]), lambda line: None)


@pytest.mark.parametrize(
    "lines, error",
    [
        (["{not json"], "line 1 is not JSON"),
        (["[1]"], "line 1 is not a JSON object"),
        ([], "ended before a user message"),
        ([json.dumps({"type": "user", "message": {"role": "user", "content": [{"type": "image"}]}})], "has no text"),
    ],
)
def test_input_without_a_task_says_why(lines: list[str], error: str) -> None:
    with pytest.raises(StreamInputError, match=error):
        read_task(iter(lines), lambda line: None)
