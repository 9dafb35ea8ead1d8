"""Names and result mapping, on the SDK's own result values (no server needed)."""

from __future__ import annotations

import base64
import io
import json

import mcp_types as types
from PIL import Image

from roost.daemon.mcp._tools import as_server, mcp_tool, qualified_name, selected, split_name, tool_result
from roost.daemon.tools._media import Media


def test_names() -> None:
    assert qualified_name("time", "get_current_time") == "time__get_current_time"
    assert qualified_name("fs", "read.file v2") == "fs__read_file_v2"
    assert len(qualified_name("s", "x" * 100)) == 64
    assert split_name("fs__read__all") == ("fs", "read__all")
    assert split_name("plain") is None and split_name("__x") is None
    assert selected("fs__read", None) and selected("fs__read", ["fs__*"]) and not selected("fs__read", ["git__*"])
    tool = types.Tool(name="read.file", title="Read", input_schema={"type": "object"})
    assert mcp_tool("fs", tool).description == "Read"
    assert (mcp_tool("fs", tool).name, mcp_tool("fs", tool).tool) == ("fs__read_file", "read.file")
    # one server, named otherwise in another project's config
    renamed = as_server(mcp_tool("fs", tool), "files")
    assert (renamed.name, renamed.server, renamed.tool) == ("files__read_file", "files", "read.file")
    assert as_server(mcp_tool("fs", tool), "fs") == mcp_tool("fs", tool)


def _png(width: int, height: int) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (0, 90, 200)).save(out, "PNG")
    return out.getvalue()


def test_text_images_and_other_blocks() -> None:
    image = _png(6, 4)
    png = base64.b64encode(image).decode()
    pdf = base64.b64encode(b"%PDF-1.4 pretend").decode()
    result = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="first"),
            types.ImageContent(type="image", data=png, mime_type="image/png"),
            types.ImageContent(type="image", data=base64.b64encode(b"\x89PNG" + bytes(96)).decode(), mime_type="image/png"),
            types.AudioContent(type="audio", data=base64.b64encode(b"abcde").decode(), mime_type="audio/wav"),
            types.ResourceLink(type="resource_link", uri="file:///a.txt", name="a.txt", description="notes"),
            types.EmbeddedResource(
                type="resource", resource=types.TextResourceContents(uri="file:///b.txt", text="inline text")
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(uri="file:///c.bin", blob=base64.b64encode(b"xyz").decode()),
            ),
            types.EmbeddedResource(
                type="resource",
                resource=types.BlobResourceContents(uri="file:///d.pdf", blob=pdf, mime_type="application/pdf"),
            ),
        ]
    )
    mapped = tool_result(result)
    assert mapped.text.split("\n") == [
        "first",
        "[image 6x4, 1 KB]",
        "[image: image/png, 1 KB, not sent: not a PNG, JPEG, GIF or WebP image]",
        "[audio: audio/wav, 1 KB]",
        "[resource link: file:///a.txt (a.txt): notes]",
        "inline text",
        "[resource: file:///c.bin, application/octet-stream, 3 bytes]",
        "[resource: file:///d.pdf] [document: application/pdf, 1 KB]",
    ]
    # The image, the audio and the PDF are parts the model is sent; a broken image is not.
    assert mapped.parts == (
        Media("image", "image/png", image, 6, 4),
        Media("audio", "audio/wav", b"abcde"),
        Media("document", "application/pdf", b"%PDF-1.4 pretend"),
    )
    assert mapped.meta == {}
    assert not mapped.is_error


def test_structured_content_and_errors() -> None:
    structured = {"temperature": 21, "unit": "C"}
    alone = tool_result(types.CallToolResult(content=[], structured_content=structured))
    assert alone.text == '{"temperature": 21, "unit": "C"}' and alone.meta == {"structured": structured}
    # servers are asked to send the same JSON as text too: not repeated
    both = tool_result(types.CallToolResult(
        content=[types.TextContent(type="text", text='{\n  "unit": "C", "temperature": 21\n}')],
        structured_content=structured,
    ))
    assert both.text.count("temperature") == 1
    # the same JSON in two text blocks, or beside an image: still once
    split = tool_result(types.CallToolResult(
        content=[types.TextContent(type="text", text='{"temperature": 21,'),
                 types.TextContent(type="text", text='"unit": "C"}')],
        structured_content=structured,
    ))
    assert split.text.count("temperature") == 1
    png = base64.b64encode(_png(2, 2)).decode()
    pictured = tool_result(types.CallToolResult(
        content=[types.ImageContent(type="image", data=png, mime_type="image/png")], structured_content=structured,
    ))
    assert pictured.text == '[image 2x2, 1 KB]\n{"temperature": 21, "unit": "C"}'
    failed = tool_result(types.CallToolResult(content=[types.TextContent(type="text", text="no")], is_error=True))
    assert (failed.text, failed.is_error) == ("no", True)


def test_structured_content_that_the_text_already_says_is_sent_once() -> None:
    # A file server's read: the file as text, and {"content": <the same text>} (a 7.7 KB file
    # used to come back as a 15.7 KB result).
    file = "".join(f"line {i}:\t{'x' * 70}\n" for i in range(100))
    read = tool_result(types.CallToolResult(
        content=[types.TextContent(type="text", text=file)], structured_content={"content": file}
    ))
    assert read.text == file and read.meta == {"structured": {"content": file}}
    # spaced otherwise, with numbers and flags beside it
    listing = {"files": ["a.txt", "notes  and\nmore.md"], "count": 2, "truncated": False}
    shown = tool_result(types.CallToolResult(
        content=[types.TextContent(type="text", text="2 files:\n- a.txt\n- notes and more.md")],
        structured_content=listing,
    ))
    assert shown.text == "2 files:\n- a.txt\n- notes and more.md"
    # the text says less than the structured content: both go, the JSON once
    for text, value in (
        ("Found 3 items", {"items": ["alpha", "beta", "gamma"]}),
        ("created", {"id": "a"}),  # "a" is no word of "created"
        ("done", {"ok": True}),  # flags alone are not looked for
    ):
        result = tool_result(types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=value
        ))
        assert result.text == text + "\n" + json.dumps(value), result.text
