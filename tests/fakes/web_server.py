"""A small web site on 127.0.0.1 for the ``web_fetch`` tests: fixed pages, redirects, a
body without end, a page that never answers, errors.

It shares the fakes' HTTP plumbing (:mod:`tests.fakes._http`): every ``GET`` is recorded in
``requests``, accepted connections are counted, and ``close`` cuts the streams that are
still going.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from ._http import FakeHandler, FakeServer, RecordedRequest, Turn, serving

PAGE = b"""<!DOCTYPE html>
<html><head><title>The Page</title><style>body { color: red }</style>
<script>document.write("not content")</script></head>
<body>
<h1>Hello, web</h1>
<p>Read the <a href="/docs/intro.html">introduction</a> or <a href="javascript:void(0)">nothing</a>.</p>
<p><img src="data:image/png;base64,iVBORw0KGgo=" alt="a dot"> <img src="logo.png" alt="logo"></p>
<ul><li>one</li><li>two</li></ul>
<pre><code>x = 1</code></pre>
<noscript>enable scripts</noscript>
</body></html>
"""
NOT_FOUND = b"<html><head><title>404</title></head><body><p>No such page here.</p></body></html>"
#: Bytes of each piece of the endless body.
PIECE = 64 * 1024


class WebHandler(FakeHandler):
    server: WebServer

    def do_GET(self) -> None:
        self.server._take(RecordedRequest("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, None))
        port = self.server.server_address[1]
        route = self.path.split("?")[0]
        if route == "/page.html":
            self.send_bytes(200, "text/html; charset=utf-8", PAGE, {}, 0)
        elif route == "/latin1.html":
            body = "<html><body><p>caf\u00e9</p></body></html>".encode("latin-1")
            self.send_bytes(200, "text/html; charset=iso-8859-1", body, {}, 0)
        elif route == "/notes.txt":
            self.send_bytes(200, "text/plain", b"line one\nline two\n", {}, 0)
        elif route == "/data.json":
            self.send_bytes(200, "application/json", b'{"a": [1, 2]}', {}, 0)
        elif route == "/logo.png":
            self.send_bytes(200, "image/png", b"\x89PNG\r\n\x1a\n" + bytes(1000), {}, 0)
        elif route == "/unlabelled":
            self.send_bytes(200, "", b"\x00\x01\x02binary", {}, 0)
        elif route == "/long.txt":
            self.send_bytes(200, "text/plain", "".join(f"{i:04d}\n" for i in range(2000)).encode(), {}, 0)
        elif route == "/redirect":
            self.redirect("/page.html")
        elif route == "/twice":
            self.redirect(f"http://127.0.0.1:{port}/redirect")
        elif route == "/loop":
            self.redirect("/loop")
        elif route == "/away":
            self.redirect(f"http://localhost:{port}/page.html")
        elif route == "/to-file":
            self.redirect("file:///etc/passwd")
        elif route == "/endless":
            self.endless()
        elif route == "/silent":
            self.pause(None)
        else:
            self.send_bytes(404, "text/html", NOT_FOUND, {}, 0)

    def redirect(self, location: str) -> None:
        self.send_bytes(302, "text/plain", b"moved", {"location": location}, 0)

    def endless(self) -> None:
        """A text body that goes on until the client hangs up (or the server closes)."""
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        piece = b"x" * (PIECE - 1) + b"\n"
        try:
            while not self.server._closing.is_set():
                self.write_chunk(piece)
                self.server.sent += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            self.server.hung_up.set()

    def respond(self, turn: Turn | None, body: Any, n: int) -> None:
        self.send_bytes(405, "text/plain", b"GET only", {}, n)


class WebServer(FakeServer):
    handler = WebHandler
    thread_name = "fake-web"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Bytes of the endless body written so far.
        self.sent = 0
        #: Set when a client hung up on the endless body.
        self.hung_up = threading.Event()


def serve_web() -> contextlib.AbstractContextManager[WebServer]:
    """The site on 127.0.0.1, a free port, for the block (see :func:`tests.fakes._http.serving`)."""
    return serving(WebServer)
