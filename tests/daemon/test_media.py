"""Images and PDFs through the daemon: ``read`` on an image gives the model an image part
(stored once, by digest; each provider sent it in its own shape), on a PDF its text; the
read rules hold for them as for text; hostile files are clear tool errors."""

from __future__ import annotations

import base64
import hashlib
import io
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from roost.daemon.folder._project import user_config_file
from roost.daemon.tools._media import MAX_SIDE
from roost.protocol.trio_client import TrioClient
from tests.fakes.anthropic_server import serve_anthropic
from tests.fakes.openai_server import serve_openai

from .conftest import events_until, finished, stored


def png(width: int, height: int, color: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), color).save(out, "PNG")
    return out.getvalue()


def noisy_png(width: int, height: int) -> bytes:
    """A PNG that does not compress (random pixels): large in bytes as well as in pixels."""
    out = io.BytesIO()
    Image.frombytes("RGB", (width, height), hashlib.shake_256(b"noise").digest(width * height * 3)).save(out, "PNG")
    return out.getvalue()


def bomb_png(width: int = 100_000, height: int = 100_000) -> bytes:
    """A tiny PNG whose header claims ``width`` x ``height`` 1-bit pixels: decoded, it would
    take gigabytes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = zlib.compress(b"\0" * 1000)
    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")


def text_pdf(*pages: str) -> bytes:
    """A minimal PDF with one page of Helvetica text per item of ``pages``."""
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b""]
    kids = []
    font = 3
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for text in pages:
        stream = f"BT /F1 12 Tf 72 712 Td ({text}) Tj ET".encode()
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
        content = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (content, font)
        )
        kids.append(b"%d 0 R" % len(objects))
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(kids), len(kids))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def reads(path: str, then: str = "seen") -> list[dict[str, Any]]:
    """An Anthropic script: read ``path``, then answer ``then``."""
    return [
        {"content": [{"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": path}}],
         "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}},
        {"content": [{"type": "text", "text": then}], "stop_reason": "end_turn",
         "usage": {"input_tokens": 20, "output_tokens": 2}},
    ]


async def run_anthropic(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch, script: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Dispatch a task against a fake Messages API; the run's events and the bodies sent."""
    with serve_anthropic(script) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        run = await client.call("dispatch", yes=True, task="look", model="anthropic/claude-test", cwd=str(project), attach=True)
        events = await events_until(client, finished(run["run"]))
        return events, [r.body for r in server.requests]


async def run_openai(
    client: TrioClient, project: Path, script: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Dispatch a task against a fake OpenAI-compatible server (provider ``local``)."""
    with serve_openai(script) as server:
        config = user_config_file()
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(
            f'[providers.local]\nkind = "openai"\nbase_url = "{server.base_url}"\napi_key_env = ""\n'
            'models = { small = "qwen3:8b" }\n'
        )
        run = await client.call("dispatch", yes=True, task="look", model="local/small", cwd=str(project), attach=True)
        events = await events_until(client, finished(run["run"]))
        return events, [r.body for r in server.requests]


def tool_finished(events: list[dict[str, Any]]) -> dict[str, Any]:
    return next(e for e in stored(events) if e["type"] == "tool.finished")


async def test_an_image_read_reaches_anthropic_as_an_image_block_in_the_tool_result(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = png(40, 30)
    (project / "shot.png").write_bytes(data)
    events, bodies = await run_anthropic(client, project, monkeypatch, reads("shot.png"))

    finished_ = tool_finished(events)
    assert finished_["is_error"] is False and "image 40x30" in finished_["result"]
    # The event names the image by digest: the bytes are never in an event.
    (part,) = finished_["parts"]
    assert part == {"type": "image", "media_type": "image/png", "sha256": hashlib.sha256(data).hexdigest(),
                    "bytes": len(data), "width": 40, "height": 30}
    result = bodies[1]["messages"][2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1"
    text, image = result["content"][0], result["content"][1]
    assert text["type"] == "text" and "image 40x30" in text["text"]
    assert image["type"] == "image"
    assert image["source"] == {"type": "base64", "media_type": "image/png", "data": base64.b64encode(data).decode()}
    # Stored events as a client reads them back hold the reference, not the data.
    back = await client.call("events", session=finished_["session"])
    assert base64.b64encode(data).decode() not in repr(back)


async def test_every_later_request_of_the_run_still_carries_the_image(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = png(20, 10)
    (project / "shot.png").write_bytes(data)
    (project / "notes.txt").write_text("plain text\n")
    script = reads("shot.png")[:1] + [
        {"content": [{"type": "tool_use", "id": f"toolu_{n}", "name": "read", "input": {"path": "notes.txt"}}],
         "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}}
        for n in (2, 3)
    ] + reads("shot.png")[1:]
    events, bodies = await run_anthropic(client, project, monkeypatch, script)

    assert [e["type"] for e in stored(events)].count("tool.finished") == 3
    # Each request after the read sends the whole history, the image in it with its bytes
    # (looked through once for media, filled at every call).
    for body in bodies[1:]:
        image = body["messages"][2]["content"][0]["content"][1]
        assert image["source"]["data"] == base64.b64encode(data).decode()
    assert len(bodies) == 4 and len(bodies[3]["messages"]) == 7


async def test_a_large_image_is_scaled_down_before_it_is_sent(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "big.png").write_bytes(noisy_png(4000, 300))
    events, bodies = await run_anthropic(client, project, monkeypatch, reads("big.png"))

    (part,) = tool_finished(events)["parts"]
    assert (part["width"], part["height"]) == (MAX_SIDE, 118)
    sent = bodies[1]["messages"][2]["content"][0]["content"][1]["source"]
    with Image.open(io.BytesIO(base64.b64decode(sent["data"]))) as image:
        assert image.size == (MAX_SIDE, 118)
    assert sent["media_type"] == part["media_type"] == "image/jpeg"


async def test_an_image_read_reaches_an_openai_compatible_server_in_a_user_message(
    client: TrioClient, project: Path
) -> None:
    data = png(8, 8)
    (project / "dot.png").write_bytes(data)
    script = [
        {"content": "", "tool_calls": [{"id": "call_1", "name": "read", "arguments": {"path": "dot.png"}}]},
        {"content": "A red dot."},
    ]
    events, bodies = await run_openai(client, project, script)
    assert events[-1]["reason"] == "done"
    messages = bodies[1]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "user"]
    # A tool message takes text only: the image follows in a user message.
    assert "image 8x8" in messages[3]["content"]
    note, image = messages[4]["content"]
    assert note == {"type": "text", "text": "[media of tool call call_1]"}
    assert image == {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(data).decode()}}


async def test_a_server_that_refuses_images_gets_a_note_in_their_place(client: TrioClient, project: Path) -> None:
    (project / "dot.png").write_bytes(png(8, 8))
    refused = {"status": 400, "error": {"message": "image input is not supported by this model", "type": "invalid_request_error"}}
    script = [
        {"content": "", "tool_calls": [{"id": "call_1", "name": "read", "arguments": {"path": "dot.png"}}]},
        refused,
        {"content": "I cannot see it."},
    ]
    events, bodies = await run_openai(client, project, script)
    assert events[-1]["reason"] == "done" and events[-1]["text"] == "I cannot see it."
    assert bodies[1]["messages"][4]["content"][1]["type"] == "image_url"
    note = bodies[2]["messages"][4]["content"]
    assert note == "[media of tool call call_1]\n\n[image 8x8 (image/png) not sent: local's model takes no images]"




async def test_a_pdf_read_gives_its_text_by_page(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / "doc.pdf").write_bytes(text_pdf("First page words", "Second page words"))
    events, bodies = await run_anthropic(client, project, monkeypatch, reads("doc.pdf"))

    result = tool_finished(events)
    assert result["is_error"] is False and "parts" not in result
    assert "--- page 1 ---\nFirst page words" in result["result"]
    assert "--- page 2 ---\nSecond page words" in result["result"]
    assert "First page words" in bodies[1]["messages"][2]["content"][0]["content"]


@pytest.mark.parametrize(
    ("name", "data", "error"),
    [
        ("bomb.png", bomb_png(), "refused"),
        ("wide.png", bomb_png(8_000, 6_000), "over the 25,000,000 decoded at most"),
        ("cut.png", png(300, 300)[:200], "broken image"),
        ("fake.jpg", b"not an image at all", "not a PNG, JPEG, GIF or WebP image"),
        ("cut.pdf", text_pdf("words")[:60], "not a readable PDF"),
        ("junk.pdf", b"\x00garbage" * 100, "not a readable PDF"),
    ],
    ids=["bomb", "too-many-pixels", "truncated-png", "not-an-image", "truncated-pdf", "garbage-pdf"],
)
async def test_a_hostile_image_or_pdf_is_a_clear_tool_error(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch, name: str, data: bytes, error: str
) -> None:
    (project / name).write_bytes(data)
    events, bodies = await run_anthropic(client, project, monkeypatch, reads(name))

    result = tool_finished(events)
    assert result["is_error"] is True and "parts" not in result
    assert result["result"].startswith(f"cannot read {name}: ") and error in result["result"]
    assert events[-1]["reason"] == "done"


async def test_a_denied_image_is_refused_as_a_denied_text_file_is(
    client: TrioClient, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = project / "secret"
    secret.mkdir()
    (secret / "plan.png").write_bytes(png(10, 10))
    config = user_config_file()
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('[permissions]\ndeny = ["read(secret/**)"]\n')
    # Asked for directly, and through a link that leads there.
    (project / "innocent.png").symlink_to(secret / "plan.png")
    script = [
        {"content": [{"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "secret/plan.png"}},
                     {"type": "tool_use", "id": "toolu_2", "name": "read", "input": {"path": "innocent.png"}}],
         "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}},
        {"content": [{"type": "text", "text": "no"}], "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}},
    ]
    events, bodies = await run_anthropic(client, project, monkeypatch, script)

    results = [e for e in stored(events) if e["type"] == "tool.finished"]
    assert len(results) == 2
    for result in results:
        assert result["is_error"] is True and "parts" not in result
    sent = bodies[1]["messages"][2]["content"]
    assert all(isinstance(r["content"], str) for r in sent)
    assert not any(b.get("type") == "image" for r in sent for b in r.get("content", []) if isinstance(b, dict))
