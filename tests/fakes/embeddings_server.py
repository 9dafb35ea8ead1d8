"""A fake OpenAI-compatible Embeddings API on 127.0.0.1 with deterministic vectors.

Design: the plumbing of :mod:`tests.fakes._http` (as :mod:`tests.fakes.openai_server`); this
module holds the wire format. ``POST /v1/embeddings`` with ``{"model", "input": str |
[str]}`` is answered as OpenAI documents it::

    {"object": "list", "model": M, "usage": {"prompt_tokens", "total_tokens"},
     "data": [{"object": "embedding", "index": i, "embedding": [float, ...]}]}

The vector of a text is a hashed bag of its words (:func:`vector`): each word (but
:data:`STOPWORDS`), lower-cased and taken to its group in :data:`SYNONYMS` (so "car" and "automobile" are one word here, as
a real model puts them close), adds +1 or -1 (by its hash) to one of :data:`DIMS`
dimensions (by its hash); the model's name seeds the hash, so two models give different
vectors. Every request is recorded in :attr:`FakeEmbeddingsServer.requests`.

Each request takes the next turn of the script, then ``default`` (``{}``: vectors). A turn
may say ``"status"`` (that HTTP status with OpenAI's JSON error body) and
``"first_byte_after"`` (seconds before the status line: a slow endpoint).
:meth:`FakeEmbeddingsServer.answer_with` sets what every later request gets.

Resource handling: as :mod:`tests.fakes.openai_server` (:func:`serve_embeddings` closes it).
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import re
from typing import Any, Iterable

from tests.fakes import _http
from tests.fakes._http import Turn

__all__ = ["DIMS", "SYNONYMS", "FakeEmbeddingsServer", "serve_embeddings", "vector"]

#: Dimensions of every vector.
DIMS = 256
#: Words a real model would put close, each to its group's first word.
SYNONYMS = {w: group[0] for group in (("car", "automobile", "vehicle"), ("fix", "repair", "mend"),
                                         ("quick", "fast", "rapid")) for w in group}

#: Words that say little of a text's meaning: left out (a real model weighs them little).
STOPWORDS = frozenset("a an and at do does for how i in is it my of on the to with".split())

_PATH = "/v1/embeddings"
_WORD = re.compile(r"\w+")


def vector(text: str, model: str = "fake-embed") -> list[float]:
    """The fake model's embedding of ``text`` (unit length; all zeros for no word)."""
    v = [0.0] * DIMS
    for word in _WORD.findall(text.lower()):
        if word in STOPWORDS:
            continue
        h = hashlib.sha256(f"{model}:{SYNONYMS.get(word, word)}".encode()).digest()
        v[h[0] % DIMS] += 1.0 if h[1] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]


class _Handler(_http.FakeHandler):
    server: FakeEmbeddingsServer
    request_id_header = "x-request-id"

    def respond(self, turn: Turn | None, body: Any, n: int) -> None:
        if self.path.split("?", 1)[0] != _PATH:
            self.send_json(404, {"error": {"message": f"Invalid URL (POST {self.path})", "type": "invalid_request_error",
                                           "param": None, "code": None}}, {}, n)
            return
        turn = turn or {}
        if "status" in turn:
            self.send_json(int(turn["status"]), {"error": {"message": "The server had an error", "type": "server_error",
                                                           "param": None, "code": None}}, {}, n)
            return
        request = body if isinstance(body, dict) else {}
        model = str(request.get("model", "fake-embed"))
        texts = request.get("input", [])
        texts = [texts] if isinstance(texts, str) else list(texts)
        tokens = sum(len(_WORD.findall(t)) for t in texts)
        self.send_json(200, {
            "object": "list", "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            "data": [{"object": "embedding", "index": i, "embedding": vector(t, model)} for i, t in enumerate(texts)],
        }, {}, n)


class FakeEmbeddingsServer(_http.FakeServer):
    """The server; use :func:`serve_embeddings`. :attr:`base_url` is ``http://127.0.0.1:PORT/v1``."""

    handler = _Handler
    thread_name = "fake-embeddings"
    url_path = "/v1"

    def answer_with(self, turn: Turn) -> None:
        """What every request gets from now on, once the script is done (``{}``: vectors)."""
        with self._lock:
            self._default = turn

    def texts(self) -> list[str]:
        """Every text asked for so far, in order."""
        out: list[str] = []
        for request in list(self.requests):
            texts = (request.body or {}).get("input", [])
            out += [texts] if isinstance(texts, str) else texts
        return out


def serve_embeddings(script: Iterable[Turn] = (), *, port: int = 0) -> contextlib.AbstractContextManager[FakeEmbeddingsServer]:
    """Serve embeddings for the block (``script``: turns for the first requests)."""
    return _http.serving(FakeEmbeddingsServer, script, default={}, port=port)
