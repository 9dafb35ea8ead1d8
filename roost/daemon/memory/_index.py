"""The memory index: entries the daemon can recall, searched with SQLite's FTS5 (BM25), and
by meaning too when an embeddings model is configured (``_embedder``, ``_vectors``): then a
search fuses the two rankings (reciprocal-rank fusion).

What is in it (never an entry that carries a credential the secrets guardrail knows): the
entries of the user's and each project's memory files (what ``remember``
appends, split by :func:`split_entries`), each finished task with its final answer, and
each compaction's summary; by scope: ``user``, or a project's root. It lives in
``memory.db`` beside the event store: derived data, rebuilt from the files and from what
runs store from here on, so that its writes never wait on (or hold up) the event store's one
writer. The files stay the truth for their entries: a file that changed is read again, and
forgetting one of its entries takes its lines out of the file.

All SQLite work runs on one worker thread at a time (the index's own limiter); every method
is a coroutine.

Error handling:
    A database that cannot be opened or written raises :class:`sqlite3.Error` from the
    method; a memory file that cannot be read is left as it was indexed.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable, TypeVar

import trio

from roost.loop import SECRET_PATTERNS, linear_regex

from ..folder._files import FileRefused, read_bounded
from ._embedder import SEARCH_SECONDS, Embedder
from ._entries import ENTRY_CHARS, entry_digest, entry_spans, fts_query
from ._vectors import SCHEMA as _VECTORS, VectorTable

__all__ = ["KINDS", "MEMORY_FILE_LIMIT", "MemoryEntry", "MemoryIndex"]

_T = TypeVar("_T")

#: What an entry can be.
KINDS = ("file", "task", "summary", "learned")
#: The largest memory file indexed (a larger one is left as it was).
MEMORY_FILE_LIMIT = 4 * 1024 * 1024
#: Reciprocal-rank fusion: an entry's score is the sum over the rankings that hold it of
#: 1 / (RRF_K + its rank there), rank 1 the best (the constant of Cormack et al., 2009).
RRF_K = 60
#: Entries each ranking gives the fusion, at least.
_POOL = 20

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    scope TEXT NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    source TEXT NOT NULL,
    created REAL NOT NULL,
    digest TEXT NOT NULL,
    UNIQUE (scope, digest)
);
CREATE INDEX IF NOT EXISTS entries_source ON entries (source);
CREATE VIRTUAL TABLE IF NOT EXISTS entries_fts USING fts5(
    text, content='entries', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER IF NOT EXISTS entries_added AFTER INSERT ON entries BEGIN
    INSERT INTO entries_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER IF NOT EXISTS entries_removed AFTER DELETE ON entries BEGIN
    INSERT INTO entries_fts (entries_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, stamp TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS forgotten (scope TEXT NOT NULL, digest TEXT NOT NULL, PRIMARY KEY (scope, digest));
"""


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One entry, and how well it matched a search (higher is better; None: not a search)."""

    id: int
    scope: str
    kind: str
    text: str
    source: str
    created: float
    score: float | None = None

    def to_map(self) -> dict[str, Any]:
        """The entry as the protocol carries it."""
        m = {"id": self.id, "scope": self.scope, "kind": self.kind, "text": self.text,
             "source": self.source, "created": self.created}
        if self.score is not None:
            m["score"] = round(self.score, 4)
        return m


class MemoryIndex:
    """The index in one SQLite file (see the module).

    Resource handling:
        :meth:`open` it; :meth:`close` when done.
    """

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._thread = trio.CapacityLimiter(1)
        self._vectors = VectorTable(db)
        #: The entries' embeddings (no model configured: lexical search only).
        self.embedder = Embedder(self)
        # No entry since it opened: a search finds nothing without a trip to the index's
        # thread (every dispatch searches it; most people's has nothing in it yet).
        self._empty = db.execute("SELECT 1 FROM entries LIMIT 1").fetchone() is None

    @classmethod
    def open(cls, path: Path) -> MemoryIndex:
        """Open (creating as needed) the index at ``path`` (private to the user)."""
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        os.chmod(path, 0o600)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA busy_timeout=5000")
        db.executescript(_SCHEMA)
        db.executescript(_VECTORS)
        return cls(db)

    async def close(self) -> None:
        """Close the database."""
        await self._run(self._db.close)

    async def _run(self, fn: Callable[..., _T], *args: Any) -> _T:
        return await trio.to_thread.run_sync(fn, *args, limiter=self._thread)

    # -- writing ------------------------------------------------------------------------------

    async def add(self, scope: str, kind: str, text: str, source: str, created: float | None = None) -> int | None:
        """Index an entry; its id (None: the same words are in the scope already, or were
        forgotten there)."""
        entry = await self._run(self._add, scope, kind, text, source, created if created is not None else time.time())
        if entry is not None:
            self.embedder.wake()
        return entry

    def _add(self, scope: str, kind: str, text: str, source: str, created: float) -> int | None:
        text = text.strip()[:ENTRY_CHARS]
        digest = entry_digest(text)
        if not text or carries_secret(text) or self._db.execute("SELECT 1 FROM forgotten WHERE scope = ? AND digest = ?", (scope, digest)).fetchone():
            return None
        cursor = self._db.execute(
            "INSERT OR IGNORE INTO entries (scope, kind, text, source, created, digest) VALUES (?, ?, ?, ?, ?, ?)",
            (scope, kind, text, source, created, digest),
        )
        if not cursor.rowcount:
            return None
        self._empty = False
        return cursor.lastrowid

    async def sync_files(self, files: Iterable[tuple[str, Path, Path | None]]) -> None:
        """Index memory files as they are now: ``(scope, path, within)`` each (``within``: the
        folder a project's file must really be in). A file unchanged since it was indexed is
        not read again; of a changed one, the entries still in it keep their ids, new ones
        are added and those gone from it go; a file that went its entries go with it."""
        if await self._run(self._sync_files, list(files)):
            self.embedder.wake()

    def _sync_files(self, files: list[tuple[str, Path, Path | None]]) -> bool:
        read = False
        for scope, path, within in files:
            try:
                st = path.stat()
                stamp = f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
            except OSError:
                stamp = ""
            row = self._db.execute("SELECT stamp FROM files WHERE path = ?", (str(path),)).fetchone()
            if row is not None and row[0] == stamp:
                continue
            text = ""
            if stamp:
                try:
                    text = read_bounded(path, MEMORY_FILE_LIMIT, within=within).decode("utf-8", "replace")
                except (FileRefused, OSError):
                    continue  # as it was indexed: a file that cannot be read now says nothing new
            entries = [entry for entry, _, _ in entry_spans(text)]
            kept = {entry_digest(e) for e in entries}
            with self._db:
                self._db.execute("BEGIN")
                # Entries still in the file keep their ids; those gone from it go.
                for entry_id, digest in self._db.execute(
                    "SELECT id, digest FROM entries WHERE source = ? AND kind = 'file'", (str(path),)
                ).fetchall():
                    if digest not in kept:
                        self._db.execute("DELETE FROM entries WHERE id = ?", (entry_id,))
                created = st.st_mtime if stamp else time.time()
                for entry in entries:
                    self._add(scope, "file", entry, str(path), created)
                self._db.execute("INSERT OR REPLACE INTO files (path, stamp) VALUES (?, ?)", (str(path), stamp))
            read = True
        return read

    async def forget(self, entry_id: int) -> MemoryEntry | None:
        """Take an entry out (None: there is none by that id): for good, so that the same
        words are not indexed again in its scope; an entry of a memory file leaves the file
        too."""
        return await self._run(self._forget, entry_id)

    def _forget(self, entry_id: int) -> MemoryEntry | None:
        row = self._db.execute(f"SELECT {_COLUMNS} FROM entries WHERE id = ?", (entry_id,)).fetchone()
        if row is None:
            return None
        entry = _entry(row)
        digest = entry_digest(entry.text)
        if entry.kind == "file":
            _drop_from_file(Path(entry.source), digest)
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute("DELETE FROM entries WHERE id = ?", (entry_id,))
            self._db.execute("INSERT OR IGNORE INTO forgotten (scope, digest) VALUES (?, ?)", (entry.scope, digest))
            if entry.kind == "file":
                self._db.execute("DELETE FROM files WHERE path = ?", (entry.source,))
        return entry

    # -- reading ------------------------------------------------------------------------------

    async def search(self, query: str, scopes: Iterable[str] | None, limit: int = 8,
                     leave_out: Iterable[str] = (), *, embed_within: float | None = SEARCH_SECONDS) -> list[MemoryEntry]:
        """The entries of ``scopes`` (None: of every scope) that best match ``query`` (free
        text), best first; those from the sources ``leave_out`` names are not. Ranked by
        BM25 (any of its words); with an embeddings model, fused with the entries nearest
        the query's embedding, if that comes within ``embed_within`` seconds (None: by the
        words alone; the score is then the fusion's)."""
        if self._empty:
            return []
        match = fts_query(query)
        vector = await self.embedder.query(query, embed_within) if embed_within is not None else None
        if match is None and vector is None:
            return []
        return await self._run(self._search, match, vector, None if scopes is None else list(scopes), limit, list(leave_out))

    def _search(self, match: str | None, vector: tuple[str, list[float]] | None, scopes: list[str] | None,
                limit: int, leave_out: list[str]) -> list[MemoryEntry]:
        if scopes == []:
            return []
        pool = limit if vector is None else max(limit, _POOL)
        lexical = self._lexical(match, scopes, pool, leave_out) if match is not None else []
        if vector is None:
            return lexical
        near = self._vectors.nearest(vector[0], vector[1], scopes, pool, leave_out)
        fused: dict[int, float] = {}
        for ranking in ([e.id for e in lexical], [entry for entry, _ in near]):
            for rank, entry_id in enumerate(ranking, 1):
                fused[entry_id] = fused.get(entry_id, 0.0) + 1.0 / (RRF_K + rank)
        best = sorted(fused, key=lambda entry_id: (-fused[entry_id], entry_id))[:limit]
        known = {e.id: e for e in lexical}
        missing = [entry_id for entry_id in best if entry_id not in known]
        if missing:
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM entries WHERE id IN ({', '.join('?' * len(missing))})", missing
            ).fetchall()
            known.update((int(row[0]), _entry(row)) for row in rows)
        return [replace(known[entry_id], score=fused[entry_id]) for entry_id in best if entry_id in known]

    def _lexical(self, match: str, scopes: list[str] | None, limit: int, leave_out: list[str]) -> list[MemoryEntry]:
        within = "" if scopes is None else f" AND e.scope IN ({', '.join('?' * len(scopes))})"
        skip = f" AND e.source NOT IN ({', '.join('?' * len(leave_out))})" if leave_out else ""
        rows = self._db.execute(
            f"SELECT {', '.join('e.' + c for c in _COLUMNS.split(', '))}, bm25(entries_fts) FROM entries_fts "
            f"JOIN entries e ON e.id = entries_fts.rowid "
            f"WHERE entries_fts MATCH ?{within}{skip} ORDER BY bm25(entries_fts) LIMIT ?",
            (match, *(scopes or ()), *leave_out, limit),
        ).fetchall()
        # BM25 as SQLite gives it is lower for better matches.
        return [_entry(row[:-1], -row[-1]) for row in rows]

    # -- vectors (see _embedder) ----------------------------------------------------------------

    async def unembedded(self, model: str, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` entries with no vector by ``model``: id and text each."""
        return await self._run(self._vectors.missing, model, limit)

    async def store_vectors(self, model: str, vectors: list[tuple[int, list[float]]]) -> None:
        """Keep the vectors ``model`` gave entries: ``(id, vector)`` each."""
        await self._run(self._vectors.store, model, vectors)

    async def keep_vectors_of(self, model: str) -> None:
        """Drop the vectors of every model but ``model``."""
        await self._run(self._vectors.keep_only, model)

    async def has_vectors(self, model: str) -> bool:
        """Whether any entry has a vector by ``model``."""
        return await self._run(lambda: self._db.execute("SELECT 1 FROM vectors WHERE model = ? LIMIT 1", (model,)).fetchone() is not None)

    async def vector_count(self, model: str) -> int:
        """How many entries have a vector by ``model``."""
        return await self._run(self._vectors.count, model)

    async def entries(self, scopes: Iterable[str] | None = None, limit: int = 100) -> list[MemoryEntry]:
        """The newest entries (of ``scopes``; None: of every scope), newest first."""
        return await self._run(self._entries, None if scopes is None else list(scopes), limit)

    def _entries(self, scopes: list[str] | None, limit: int) -> list[MemoryEntry]:
        where = "" if scopes is None else f"WHERE scope IN ({', '.join('?' * len(scopes))})"
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM entries {where} ORDER BY created DESC, id DESC LIMIT ?",
            (*(scopes or ()), limit),
        ).fetchall()
        return [_entry(row) for row in rows]

    async def count(self) -> int:
        """How many entries the index holds."""
        return await self._run(lambda: int(self._db.execute("SELECT count(*) FROM entries").fetchone()[0]))


_COLUMNS = "id, scope, kind, text, source, created"


def carries_secret(text: str) -> bool:
    """Whether ``text`` holds a credential the built-in secrets guardrail knows (such an
    entry is never indexed: the index would carry it into later prompts)."""
    return any(linear_regex(pattern).search(text) for _, pattern in SECRET_PATTERNS)


def _entry(row: tuple[Any, ...], score: float | None = None) -> MemoryEntry:
    return MemoryEntry(int(row[0]), row[1], row[2], row[3], row[4], float(row[5]), score)


def _drop_from_file(path: Path, digest: str) -> None:
    """Take the lines of the entry whose words have ``digest`` out of a memory file, written
    anew in one rename (a file that cannot be read or written is left as it is)."""
    try:
        text = read_bounded(path, MEMORY_FILE_LIMIT).decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return
    lines = text.splitlines(keepends=True)
    drop = {n for entry, start, end in entry_spans(text) if entry_digest(entry) == digest for n in range(start, end)}
    if not drop:
        return
    kept = "".join(line for n, line in enumerate(lines) if n not in drop)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(kept)
        os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
