"""The ``web_fetch`` tool: a web page as Markdown text.

The daemon fetches it, not the sandbox: the permission rules decide each call on its URL
(agent mode asks), and what was decided is what is fetched, the canonical URL of
:func:`roost.loop.web_address`. Redirects are followed within the same host (at most
:data:`MAX_REDIRECTS`; http to https of that host too); one to another host ends the call
with its address, so that fetching it is a call of its own, decided on its own URL. One call
takes at most :data:`FETCH_TIMEOUT` seconds (or the call's timeout, if shorter) and reads
at most :data:`MAX_BODY` bytes of the body (streamed, the rest never read; no compression is
asked for, so that what is read is about what is kept). HTML becomes Markdown (markdownify;
scripts, styles and other parts that are not content dropped, links made absolute); text
(plain, Markdown, JSON, XML, ...) comes as it is; anything else is described, not shown.
The text is cut at the output limit, and ``offset`` reads on.

No request reaches a loopback, link-local, private or otherwise non-public address unless
the user's config allows it (``[tools.web_fetch] allow_private = true``): a model working
in a cloned repository must not make the daemon reach the services of this machine or of
its network (server-side request forgery). Every address the host name resolves to is
checked before connecting, and the address actually connected to is checked again before
a byte of the request is sent (httpcore's ``trace`` extension), so a name that resolves
elsewhere the second time (DNS rebinding) is caught too. Proxies named in the environment
are not used: the check must see where the connection goes.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Mapping

import trio

from roost import __version__
from roost.loop import WEB_FETCH, UrlError, WebAddress, web_address

from ._base import Tool, ToolContext, ToolResult

#: Seconds one call may take in all (connecting, redirects, reading).
FETCH_TIMEOUT = 30.0
#: Bytes of a body read at most.
MAX_BODY = 2 * 1024 * 1024
#: Redirects followed within one host.
MAX_REDIRECTS = 5

_SCHEMA = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "minLength": 1, "description": "an http or https URL"},
        "offset": {
            "type": "integer",
            "minimum": 0,
            "description": "the first character of the page's text to show (to read on in a long page)",
        },
    },
    "required": ["url"],
    "additionalProperties": False,
}
_HEADERS = {
    "user-agent": f"roost/{__version__} (web_fetch)",
    "accept": "text/html, application/xhtml+xml, text/markdown, text/plain;q=0.9, */*;q=0.5",
    "accept-encoding": "identity",
}
_HTML = frozenset({"text/html", "application/xhtml+xml"})
_TEXT = frozenset(
    {"application/json", "application/xml", "application/javascript", "application/x-javascript",
     "application/yaml", "application/x-yaml", "application/toml", "application/x-sh"}
)
#: Parts of a page that are not its content.
_DROPPED = ("script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "embed", "head")


#: IPv6 prefixes whose last 32 bits are an IPv4 address a gateway reaches: NAT64's well-known
#: and local-use prefixes, IPv4-translated, IPv4-compatible (RFC 6052, 2765, 4291).
_EMBEDDING = tuple(
    ipaddress.IPv6Network(n) for n in ("64:ff9b::/96", "64:ff9b:1::/48", "::ffff:0:0:0/96", "::ffff:0:0/96", "::/96")
)


def carried_ipv4(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address leads to through a transition mechanism (mapped,
    translated, compatible, NAT64, 6to4, both ends of Teredo): judged as the address is."""
    if not isinstance(addr, ipaddress.IPv6Address):
        return []
    found = [a for a in (addr.ipv4_mapped, addr.sixtofour, *(addr.teredo or ())) if a is not None]
    if int(addr) > 1 and any(addr in net for net in _EMBEDDING):
        found.append(ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF))
    return found


class _Refused(Exception):
    """A call that ends without a page; the message is the result the model sees."""


@dataclass(slots=True)
class _Page:
    """What one fetch got."""

    url: str
    status: int
    reason: str
    #: The media type, lower-case, without parameters ("" when the server sent none).
    kind: str = ""
    charset: str | None = None
    #: The body's first MAX_BODY bytes; None when its type is not text (never read).
    body: bytes | None = None
    #: The body went on past MAX_BODY.
    cut: bool = False
    #: The size the server announced (Content-Length), if any.
    length: int | None = None
    redirects: list[str] = field(default_factory=list)
    #: A redirect to another host, not followed.
    elsewhere: str | None = None


async def _run_web_fetch(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    try:
        address = web_address(input["url"])
    except UrlError as exc:
        return ToolResult(f"not fetched: {exc}", is_error=True)
    timeout = min(ctx.timeout, FETCH_TIMEOUT)
    page = None
    try:
        with trio.move_on_after(timeout):
            page = await _fetch(address, _Guard(ctx.private_network))
    except _Refused as exc:
        return ToolResult(str(exc), is_error=True, meta={"url": address.url})
    if page is None:
        return ToolResult(f"{address.url}: no answer within {timeout:g} s", is_error=True, meta={"url": address.url})
    meta: dict[str, Any] = {"url": page.url, "status": page.status, "content_type": page.kind}
    if page.redirects:
        meta["redirects"] = page.redirects
    if page.elsewhere is not None:
        message = (
            f"{page.url} redirects (HTTP {page.status}) to another host: {page.elsewhere}\n"
            "Fetch that URL to follow it."
        )
        return ToolResult(message, meta={**meta, "location": page.elsewhere})
    if page.body is None:
        size = f"{page.length:,} bytes" if page.length is not None else "size unknown"
        message = f"{_head(page)}\n\n[{page.kind or 'no content type'}, {size}: not text, so not shown]"
        return ToolResult(message, is_error=page.status >= 400, meta=meta)
    text = await ctx.in_thread(_text, page, abandon_on_cancel=True)
    if text is None:
        note = f"[{page.kind or 'no content type'}, {len(page.body):,} bytes: binary, so not shown]"
        return ToolResult(f"{_head(page)}\n\n{note}", is_error=page.status >= 400, meta=meta)
    meta.update(bytes=len(page.body), cut=page.cut, chars=len(text))
    shown = _window(text, input.get("offset", 0), ctx.output_limit)
    # An error page is still a page: what it says may be what the model needs.
    return ToolResult(f"{_head(page)}\n\n{shown}", is_error=page.status >= 400, meta=meta)


async def _fetch(address: WebAddress, guard: _Guard) -> _Page:
    """GET ``address``, following redirects within its host."""
    import httpx2  # 70-80 ms to import: only once a page is fetched

    redirects: list[str] = []
    await guard.check_host(address)
    async with httpx2.AsyncClient(trust_env=False, headers=_HEADERS, timeout=FETCH_TIMEOUT) as client:
        while True:
            request = client.build_request("GET", address.url, extensions={"trace": guard.trace})
            try:
                response = await client.send(request, stream=True)
            except httpx2.HTTPError as exc:
                raise _Refused(f"{address.url}: {_failure(exc)}") from None
            try:
                if response.has_redirect_location:
                    target = _redirect(address, response.headers["location"])
                    if target.origin != address.origin and target.origin != ("https", address.host, 443):
                        return _Page(address.url, response.status_code, response.reason_phrase,
                                     redirects=redirects, elsewhere=target.url)
                    if len(redirects) == MAX_REDIRECTS:
                        raise _Refused(f"{address.url}: more than {MAX_REDIRECTS} redirects")
                    redirects.append(address.url)
                    address = target
                    await guard.check_host(address)
                    continue
                page = await _read(response, address.url)
                page.redirects = redirects
                return page
            except httpx2.HTTPError as exc:
                raise _Refused(f"{address.url}: {_failure(exc)}") from None
            finally:
                await response.aclose()


def _redirect(address: WebAddress, location: str) -> WebAddress:
    try:
        return web_address(urllib.parse.urljoin(address.url, location))
    except UrlError as exc:
        raise _Refused(f"{address.url} redirects to {location!r}, which is not fetched: {exc}") from None


async def _read(response: Any, url: str) -> _Page:
    """The response's head, and its body if it is text, up to MAX_BODY bytes."""
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    length = response.headers.get("content-length")
    page = _Page(
        url,
        response.status_code,
        response.reason_phrase,
        kind,
        response.charset_encoding,
        length=int(length) if length and length.isdigit() else None,
    )
    if kind and not _textual(kind):
        return page
    body = bytearray()
    with trio.CancelScope() as enough:
        async for chunk in response.aiter_bytes():
            room = MAX_BODY - len(body)
            if len(chunk) > room:
                # The rest is never read: the connection is closed. Cancelled at its next
                # read, the stream's generators all end (after a break, httpx's inner ones
                # would be left to the garbage collector).
                page.cut = True
                enough.cancel()
            body += chunk[:room]
    page.body = bytes(body)
    return page


def _textual(kind: str) -> bool:
    return kind.startswith("text/") or kind in _HTML or kind in _TEXT or kind.endswith(("+json", "+xml"))


def _text(page: _Page) -> str | None:
    """The page as text (blocking: parsing a large page takes a while), or None when its
    body is not text after all."""
    assert page.body is not None
    sniffed = page.body[:512].lstrip().lower()
    if page.kind in _HTML or (not page.kind and sniffed.startswith((b"<!doctype html", b"<html"))):
        return html_markdown(page.body, page.charset, page.url)
    try:
        text = page.body.decode(page.charset or "utf-8", errors="replace")
    except LookupError:
        text = page.body.decode("utf-8", errors="replace")
    return None if "\x00" in text else text


def html_markdown(html: bytes, charset: str | None, base: str) -> str:
    """An HTML page as Markdown: its title as a heading, then its content, with scripts,
    styles and the like dropped and links made absolute against ``base``."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser", from_encoding=charset)
    title = soup.title.get_text(" ", strip=True) if soup.title is not None else ""
    for tag in soup(_DROPPED):
        tag.decompose()
    for link in soup.find_all("a", href=True):
        href = str(link["href"]).strip()
        if href.lower().startswith("javascript:"):
            link.unwrap()
        else:
            link["href"] = urllib.parse.urljoin(base, href)
    for image in soup.find_all("img"):
        src = str(image.get("src", "")).strip()
        if not src or src.lower().startswith("data:"):
            # An inline image is bytes, not words: its description stands in for it.
            image.replace_with(str(image.get("alt", "")))
        else:
            image["src"] = urllib.parse.urljoin(base, src)
    markdown = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(soup)
    markdown = re.sub(r"\n\s*\n(\s*\n)+", "\n\n", markdown).strip()
    if title and not markdown.startswith("# "):
        markdown = f"# {title}\n\n{markdown}"
    return markdown


def _head(page: _Page) -> str:
    """The first line of a result: where the page came from, and what it is."""
    about = [f"HTTP {page.status} {page.reason}".rstrip(), page.kind or "no content type"]
    if page.body is not None:
        about.append(f"{len(page.body):,} bytes" + (f" (cut at {MAX_BODY:,}: the page is larger)" if page.cut else ""))
    via = f", redirected from {page.redirects[0]}" if page.redirects else ""
    return f"{page.url} ({' · '.join(about)}{via})"


def _window(text: str, offset: int, limit: int) -> str:
    """``limit`` characters of ``text`` from ``offset``, with a note of where to read on."""
    if not text:
        return "[the page has no text]"
    if offset >= len(text):
        return f"[the page's text has {len(text):,} characters; offset {offset:,} is past its end]"
    shown = text[offset : offset + limit]
    rest = len(text) - offset - len(shown)
    if rest > 0:
        shown += f"\n[{rest:,} more characters; read on with offset {offset + len(shown):,}]"
    return shown


def _failure(exc: Exception) -> str:
    """An httpx2 error in words."""
    import httpx2

    if isinstance(exc, httpx2.TimeoutException):
        return "timed out"
    if isinstance(exc, httpx2.ConnectError):
        return f"cannot connect: {exc}"
    return f"{type(exc).__name__}: {exc}"


class _Guard:
    """Refuses addresses outside the public internet, unless the user allows them."""

    def __init__(self, private: bool) -> None:
        self.private = private

    async def check_host(self, address: WebAddress) -> None:
        """Every address ``address``'s host resolves to must be public."""
        if self.private:
            return
        try:
            found = await trio.socket.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise _Refused(f"{address.url}: cannot resolve {address.host}: {exc.strerror or exc}") from None
        for *_, peer in found:
            self.check(str(peer[0]), address.host)

    def check(self, ip: str, host: str) -> None:
        if self.private:
            return
        addr = ipaddress.ip_address(ip.split("%")[0])
        for judged in (addr, *carried_ipv4(addr)):
            if judged.is_global and not judged.is_multicast:
                continue
            named = host if host == str(addr) else f"{host} ({addr})"
            raise _Refused(
                f"not fetched: {named} is not a public address (loopback, private or local network); "
                "web_fetch reaches those only if your config says [tools.web_fetch] allow_private = true"
            )

    async def trace(self, name: str, info: Mapping[str, Any]) -> None:
        """httpcore's trace hook: the address connected to, before the request is sent."""
        if self.private or not name.endswith("connect_tcp.complete"):
            return
        stream = info["return_value"]
        peer = stream.get_extra_info("server_addr")
        try:
            self.check(str(peer[0]), str(peer[0]))
        except _Refused:
            await stream.aclose()
            raise


WEB_FETCH_TOOL = Tool(
    WEB_FETCH,
    "Fetch a web page (http or https) and read it as Markdown text; plain text, JSON and the "
    "like come as they are. Long pages are cut: the end of the output says the offset to "
    "read on from. Redirects to another host are not followed: the result names the new URL. "
    "Addresses on this machine or a private network are refused unless the user allows them.",
    _SCHEMA,
    _run_web_fetch,
    read_only=True,
)
