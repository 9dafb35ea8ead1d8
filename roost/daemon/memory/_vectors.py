"""The vectors of memory entries, by embedding model, and the entries nearest a query's.

sqlite-vec was the plan, but this Python's ``sqlite3`` is built without loadable
extensions (its connections have no ``enable_load_extension``), so no SQLite extension can
be loaded into the index. What stands in, in plain SQLite and Python (no numpy):

- stored: one row per entry and model in ``vectors``: the vector at unit length as
  float16 (``vec``: half the bytes of float32, and ranks the same: a cosine off by ~1e-3)
  and its sign bits (``bits``, one bit a dimension);
- searched: the sign bits of a model's vectors are held in memory (one Python int each,
  loaded on the first search, ~100 bytes an entry), and a query's nearest are found in two
  steps, binary quantization then rescoring: the Hamming distance (XOR, ``bit_count``) to
  every vector of the scopes searched picks :data:`CANDIDATES`, and their exact cosine, from
  the stored floats, ranks them.

The caller (``MemoryIndex``) calls every method on its one worker thread.
"""

from __future__ import annotations

import heapq
import math
import operator
import sqlite3
import struct
from typing import Sequence

__all__ = ["CANDIDATES", "VectorTable"]

#: The vectors rescored exactly for a query, picked by their Hamming distance.
CANDIDATES = 100

SCHEMA = """
CREATE TABLE IF NOT EXISTS vectors (
    entry INTEGER NOT NULL,
    model TEXT NOT NULL,
    vec BLOB NOT NULL,
    bits BLOB NOT NULL,
    PRIMARY KEY (entry, model)
);
CREATE TRIGGER IF NOT EXISTS entries_unvectored AFTER DELETE ON entries BEGIN
    DELETE FROM vectors WHERE entry = old.id;
END;
"""


class VectorTable:
    """The ``vectors`` table of the index, and the sign bits of one model's in memory."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        #: The model whose bits are loaded, and its entries by scope: ids and bits.
        self._model: str | None = None
        self._scopes: dict[str, tuple[list[int], list[int]]] = {}

    def missing(self, model: str, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` entries with no vector by ``model`` yet, oldest first: id, text."""
        return self._db.execute(
            "SELECT e.id, e.text FROM entries e LEFT JOIN vectors v ON v.model = ? AND v.entry = e.id "
            "WHERE v.entry IS NULL ORDER BY e.id LIMIT ?",
            (model, limit),
        ).fetchall()

    def count(self, model: str) -> int:
        """How many entries have a vector by ``model``."""
        return int(self._db.execute("SELECT count(*) FROM vectors WHERE model = ?", (model,)).fetchone()[0])

    def keep_only(self, model: str) -> None:
        """Drop every other model's vectors (a changed model indexes anew)."""
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute("DELETE FROM vectors WHERE model != ?", (model,))
        if self._model != model:
            self._model, self._scopes = None, {}

    def store(self, model: str, vectors: Sequence[tuple[int, Sequence[float]]]) -> None:
        """Keep each ``(entry, vector)`` of ``model`` (an entry gone meanwhile is skipped; an
        empty vector marks an entry that has none)."""
        rows = []
        for entry, vector in vectors:
            # A vector of no length (or none: the endpoint refused the entry) is kept empty,
            # so that the entry is not asked for again; no search finds it by meaning.
            unit = _unit(vector)
            vec, bits = (_half(unit), _bits(unit).to_bytes(_width(len(unit)), "big")) if unit is not None else (b"", b"")
            rows.append((model, entry, vec, bits, entry))
        with self._db:
            self._db.execute("BEGIN")
            added = [
                (entry, scope, bits) for _, entry, _, bits, _ in rows if bits
                for (scope,) in self._db.execute("SELECT scope FROM entries WHERE id = ?", (entry,))
            ]
            self._db.executemany(
                "INSERT OR REPLACE INTO vectors (model, entry, vec, bits) "
                "SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM entries WHERE id = ?)", rows,
            )
        if self._model == model:
            for entry, scope, bits in added:
                ids, signs = self._scopes.setdefault(scope, ([], []))
                ids.append(entry)
                signs.append(int.from_bytes(bits, "big"))

    def nearest(self, model: str, query: Sequence[float], scopes: list[str] | None, k: int,
                leave_out: list[str]) -> list[tuple[int, float]]:
        """The ``k`` entries of ``scopes`` (None: all) nearest ``query`` by ``model``, nearest
        first, with their cosine similarity; none from the sources ``leave_out`` names."""
        unit = _unit(query)
        if unit is None:
            return []
        if self._model != model:
            self._load(model)
        q = _bits(unit)
        found: list[tuple[int, int]] = []
        for scope in self._scopes if scopes is None else scopes:
            ids, signs = self._scopes.get(scope, ((), ()))
            if ids:
                distances = [(q ^ s).bit_count() for s in signs]
                best = heapq.nsmallest(CANDIDATES, range(len(ids)), key=distances.__getitem__)
                found += [(distances[i], ids[i]) for i in best]
        candidates = [entry for _, entry in heapq.nsmallest(CANDIDATES, found)]
        if not candidates:
            return []
        skip = f" AND e.source NOT IN ({', '.join('?' * len(leave_out))})" if leave_out else ""
        rows = self._db.execute(
            f"SELECT v.entry, v.vec FROM vectors v JOIN entries e ON e.id = v.entry WHERE v.model = ? "
            f"AND v.entry IN ({', '.join('?' * len(candidates))}){skip}",
            (model, *candidates, *leave_out),
        ).fetchall()
        scored = []
        for entry, blob in rows:
            if len(blob) == 2 * len(unit):
                scored.append((sum(map(operator.mul, unit, struct.unpack(f"{len(unit)}e", blob))), entry))
        return [(entry, cosine) for cosine, entry in heapq.nlargest(k, scored)]

    def _load(self, model: str) -> None:
        self._model, self._scopes = model, {}
        for entry, scope, bits in self._db.execute(
            "SELECT v.entry, e.scope, v.bits FROM vectors v JOIN entries e ON e.id = v.entry "
            "WHERE v.model = ? AND length(v.bits) > 0", (model,)
        ):
            ids, signs = self._scopes.setdefault(scope, ([], []))
            ids.append(entry)
            signs.append(int.from_bytes(bits, "big"))


def _unit(vector: Sequence[float]) -> list[float] | None:
    """``vector`` at unit length (None: it has no length)."""
    norm = math.sqrt(math.fsum(x * x for x in vector))
    if not norm or not math.isfinite(norm):
        return None
    return [x / norm for x in vector]


def _half(vector: list[float]) -> bytes:
    return struct.pack(f"{len(vector)}e", *vector)


def _bits(vector: Sequence[float]) -> int:
    """The sign bits of ``vector``: bit i (from the top) set where dimension i is positive."""
    n = 0
    for x in vector:
        n = (n << 1) | (x > 0)
    return n


def _width(dims: int) -> int:
    return (dims + 7) // 8
