"""web_fetch against a real web site on 127.0.0.1 (tests/fakes/web_server.py): pages as
Markdown, text as it is, redirects, a body without end, errors, timeouts, and the refusal
of addresses that are not public unless the user's config allows them. Nothing reaches
the internet."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any, Iterator

import pytest
import trio

from roost.daemon.folder._project import user_config_file
from roost.daemon.tools import ToolContext, ToolRegistry, ToolResult
from roost.daemon.tools._web_fetch import MAX_BODY, carried_ipv4, html_markdown
from roost.protocol.trio_client import TrioClient
from tests.fakes.web_server import WebServer, serve_web

from .conftest import events_until, finished, text, write_script


@pytest.fixture
def site() -> Iterator[WebServer]:
    with serve_web() as server:
        yield server


async def fetch(url: str, *, private: bool = True, offset: int | None = None, **options: Any) -> ToolResult:
    """One web_fetch call; ``private``: the user allows this machine and private networks."""
    ctx = ToolContext("/", private_network=private, **options)
    input: dict[str, Any] = {"url": url} if offset is None else {"url": url, "offset": offset}
    return await ToolRegistry().call("web_fetch", input, ctx)


async def test_a_page_comes_as_markdown(site: WebServer) -> None:
    result = await fetch(f"{site.base_url}/page.html")
    assert not result.is_error, result.text
    head, _, body = result.text.partition("\n\n")
    assert head.startswith(f"{site.base_url}/page.html (HTTP 200 OK · text/html · ")
    assert body.startswith("# Hello, web\n\n")
    # links made absolute; scripts, styles, inline image bytes and javascript: links gone
    assert f"[introduction]({site.base_url}/docs/intro.html)" in body
    assert f"![logo]({site.base_url}/logo.png)" in body and "a dot" in body and "base64" not in body
    assert "nothing" in body and "javascript" not in body
    assert "- one\n- two" in body and "```\nx = 1\n```" in body
    for gone in ("color: red", "not content", "enable scripts", "The Page"):
        assert gone not in body
    assert result.meta["status"] == 200 and result.meta["content_type"] == "text/html"
    assert site.requests[0].headers["accept-encoding"] == "identity"
    assert site.requests[0].headers["user-agent"].startswith("roost/")


async def test_text_comes_as_it_is_and_other_types_are_described(site: WebServer) -> None:
    notes = await fetch(f"{site.base_url}/notes.txt")
    assert notes.text.endswith("\n\nline one\nline two\n") and not notes.is_error
    data = await fetch(f"{site.base_url}/data.json")
    assert data.text.endswith('\n\n{"a": [1, 2]}')
    image = await fetch(f"{site.base_url}/logo.png")
    assert image.text.endswith("[image/png, 1,008 bytes: not text, so not shown]") and not image.is_error
    unlabelled = await fetch(f"{site.base_url}/unlabelled")
    assert unlabelled.text.endswith("[no content type, 9 bytes: binary, so not shown]")
    latin = await fetch(f"{site.base_url}/latin1.html")
    assert latin.text.endswith("café")


async def test_redirects_within_the_host_are_followed_and_others_reported(site: WebServer) -> None:
    followed = await fetch(f"{site.base_url}/twice")
    assert followed.meta["url"] == f"{site.base_url}/page.html" and "# Hello, web" in followed.text
    assert followed.meta["redirects"] == [f"{site.base_url}/twice", f"{site.base_url}/redirect"]
    assert f", redirected from {site.base_url}/twice)" in followed.text.split("\n")[0]
    port = site.server_address[1]
    away = await fetch(f"{site.base_url}/away")
    assert not away.is_error and away.meta["location"] == f"http://localhost:{port}/page.html"
    assert away.text == (
        f"{site.base_url}/away redirects (HTTP 302) to another host: http://localhost:{port}/page.html\n"
        "Fetch that URL to follow it."
    )
    looping = await fetch(f"{site.base_url}/loop")
    assert looping.is_error and looping.text == f"{site.base_url}/loop: more than 5 redirects"
    to_file = await fetch(f"{site.base_url}/to-file")
    assert to_file.is_error and "redirects to 'file:///etc/passwd', which is not fetched" in to_file.text


async def test_a_body_without_end_is_read_only_up_to_the_cap(site: WebServer) -> None:
    with trio.fail_after(20):
        result = await fetch(f"{site.base_url}/endless")
    assert not result.is_error and result.meta["bytes"] == MAX_BODY and result.meta["cut"]
    assert f"(cut at {MAX_BODY:,}: the page is larger)" in result.text.split("\n")[0]
    # The connection was dropped: the server's writes fail (what it wrote past the cap is
    # what the kernel's socket buffers took, several MiB on loopback).
    with trio.fail_after(10):
        while not site.hung_up.is_set():
            await trio.sleep(0.01)
    assert site.sent >= MAX_BODY


async def test_long_text_is_cut_at_the_output_limit_and_read_on_with_offset(site: WebServer) -> None:
    first = await fetch(f"{site.base_url}/long.txt", output_limit=100)
    body = first.text.partition("\n\n")[2]
    assert body.startswith("0000\n0001\n") and body.endswith("\n[9,900 more characters; read on with offset 100]")
    second = await fetch(f"{site.base_url}/long.txt", output_limit=100, offset=100)
    assert second.text.partition("\n\n")[2].startswith("0020\n0021\n")
    past = await fetch(f"{site.base_url}/long.txt", offset=20_000)
    assert past.text.endswith("[the page's text has 10,000 characters; offset 20,000 is past its end]")


async def test_an_error_status_is_an_error_result_with_the_page(site: WebServer) -> None:
    result = await fetch(f"{site.base_url}/missing")
    assert result.is_error and result.meta["status"] == 404
    assert "(HTTP 404 Not Found · text/html" in result.text and "No such page here." in result.text


async def test_a_server_that_never_answers_times_out(site: WebServer, autojump_clock: trio.abc.Clock) -> None:
    result = await fetch(f"{site.base_url}/silent")
    assert result.is_error and result.text == f"{site.base_url}/silent: no answer within 30 s"
    shorter = await fetch(f"{site.base_url}/silent", timeout=5.0)
    assert shorter.text.endswith("no answer within 5 s")


async def test_what_is_not_a_fetchable_url_fails_before_any_request(site: WebServer) -> None:
    for url, why in (
        ("ftp://127.0.0.1/x", "only http and https"),
        (f"http://user@127.0.0.1:{site.server_address[1]}/", "user name or password"),
    ):
        result = await fetch(url)
        assert result.is_error and why in result.text
    refused = await fetch("http://127.0.0.1:9/")  # nothing listens on the discard port
    assert refused.is_error and "cannot connect" in refused.text
    assert site.connections == 0


async def test_loopback_and_private_addresses_are_refused_unless_allowed(site: WebServer) -> None:
    port = site.server_address[1]
    for url in (f"{site.base_url}/page.html", f"http://localhost:{port}/page.html", f"http://[::1]:{port}/"):
        result = await fetch(url, private=False)
        assert result.is_error and "is not a public address" in result.text, result.text
        assert "[tools.web_fetch] allow_private = true" in result.text
    for url in ("http://10.1.2.3/", "http://192.168.0.1/", "http://169.254.169.254/latest/meta-data/",
                "http://[fe80::1]/", "http://[::ffff:127.0.0.1]/", "http://0.0.0.0/", "http://100.64.0.1/",
                # IPv6 transition forms carrying 127.0.0.1 or 10.0.0.1: NAT64 (well-known and
                # local-use), 6to4, IPv4-compatible, IPv4-translated, Teredo (client end).
                "http://[64:ff9b::7f00:1]/", "http://[64:ff9b:1::a00:1]/", "http://[2002:7f00:1::]/",
                "http://[::7f00:1]/", "http://[::ffff:0:7f00:1]/",
                "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/"):
        result = await fetch(url, private=False)
        assert result.is_error and "is not a public address" in result.text, (url, result.text)
    # not one connection was made
    assert site.connections == 0 and site.requests == []


async def test_the_address_connected_to_is_checked_again(site: WebServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # A name that resolves to a public address when checked, and to this machine when
    # connected (DNS rebinding): the connection is dropped before the request is sent.
    from roost.daemon.tools import _web_fetch

    async def public(self: object, address: object) -> None:
        return None

    monkeypatch.setattr(_web_fetch._Guard, "check_host", public)
    result = await fetch(f"{site.base_url}/page.html", private=False)
    assert result.is_error and "127.0.0.1 is not a public address" in result.text
    with trio.fail_after(5):
        while site.connections == 0:
            await trio.sleep(0.01)
    assert site.requests == []


def test_transition_addresses_are_judged_by_the_ipv4_address_they_carry() -> None:
    assert carried_ipv4(ipaddress.ip_address("2002:808:808::")) == [ipaddress.IPv4Address("8.8.8.8")]
    assert carried_ipv4(ipaddress.ip_address("64:ff9b::808:808")) == [ipaddress.IPv4Address("8.8.8.8")]
    assert carried_ipv4(ipaddress.ip_address("2606:4700::1111")) == []
    assert carried_ipv4(ipaddress.ip_address("::1")) == [] and carried_ipv4(ipaddress.ip_address("1.2.3.4")) == []


def test_html_without_a_heading_gets_its_title() -> None:
    page = b"<html><head><title>Notes</title></head><body><p>text</p></body></html>"
    assert html_markdown(page, None, "https://example.com/") == "# Notes\n\ntext"
    assert html_markdown(b"<p>a</p>\n\n\n\n<p>b</p>", "utf-8", "https://example.com/") == "a\n\nb"


async def test_agent_mode_asks_and_the_users_config_lets_it_reach_this_machine(
    client: TrioClient, project: Path, site: WebServer
) -> None:
    call = {"type": "tool_use", "name": "web_fetch", "input": {"url": f"{site.base_url}/notes.txt"}}
    model = write_script(project, [call], [text("read it")], [call], [text("read it")])
    run = await client.call("dispatch", task="t", model=model, cwd=str(project), attach=True)
    asked = (await events_until(client, lambda e: e.get("type") == "permission.requested"))[-1]
    assert asked["tool"] == "web_fetch" and asked["session_rules"] == ["web_fetch(127.0.0.1)"]
    await client.call("permission.respond", session=run["session"], call_id=asked["call_id"], decision="approve")
    events = await events_until(client, finished(run["run"]))
    result = next(e for e in events if e["type"] == "tool.finished")
    assert result["is_error"] and "is not a public address" in result["result"]
    config = user_config_file()
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[tools.web_fetch]\nallow_private = true\n")
    allowed = f"web_fetch({site.base_url}/*)"
    run = await client.call("dispatch", task="t", model=model, session=run["session"], allow=[allowed], attach=True)
    events = await events_until(client, finished(run["run"]))
    assert "permission.requested" not in [e["type"] for e in events]
    result = next(e for e in events if e["type"] == "tool.finished")
    assert not result["is_error"] and result["result"].endswith("line one\nline two\n")
