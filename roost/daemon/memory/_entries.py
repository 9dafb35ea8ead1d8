"""What a memory entry is, without IO: a memory file split into entries, free text as a
full-text query, and the digest entries are told apart by."""

from __future__ import annotations

import hashlib
import re

#: Words a query leaves out: they match almost every entry and say nothing of the task.
_STOPWORDS = frozenset(
    "a an and are as at be by can do does for from has have how i if in into is it its me my "
    "no not of on or our please so that the their them then there these this to us was we "
    "what when where which who why will with you your".split()
)
#: Terms a query keeps (the first ones): enough for any task's gist.
QUERY_TERMS = 32
#: Characters an entry keeps.
ENTRY_CHARS = 2_000

_WORD = re.compile(r"\w+", re.UNICODE)
_BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")


def split_entries(text: str) -> list[str]:
    """A memory file's entries: each list item (what ``remember`` appends is one), and each
    other paragraph; headings and blank lines only separate them."""
    return [entry for entry, _, _ in entry_spans(text)]


def entry_spans(text: str) -> list[tuple[str, int, int]]:
    """Each entry of a memory file (see :func:`split_entries`) with the lines it takes,
    ``[start, end)`` counted from 0."""
    spans: list[tuple[str, int, int]] = []
    paragraph: list[str] = []
    start = 0

    def close(end: int) -> None:
        if paragraph:
            spans.append((" ".join(paragraph)[:ENTRY_CHARS], start, end))
            paragraph.clear()

    for n, line in enumerate(text.splitlines()):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            close(n)
            continue
        if _BULLET.match(line):
            close(n)
            stripped = _BULLET.sub("", line).strip()
        if not paragraph:
            start = n
        paragraph.append(stripped)
    close(len(text.splitlines()))
    return spans


def fts_query(text: str) -> str | None:
    """Free text as an FTS5 query: its words (not the commonest), any of them, each quoted
    so that nothing in the text is read as query syntax (None: no word to look for)."""
    terms = dict.fromkeys(
        w for w in (m.group().lower() for m in _WORD.finditer(text)) if len(w) > 1 and w not in _STOPWORDS
    )
    if not terms:
        return None
    return " OR ".join(f'"{t}"' for t in list(terms)[:QUERY_TERMS])


def entry_digest(text: str) -> str:
    """What tells entries apart: their words, whatever the spacing and case."""
    return hashlib.sha256(" ".join(text.lower().split()).encode()).hexdigest()[:32]
