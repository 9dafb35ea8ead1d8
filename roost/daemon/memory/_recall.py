"""The "similar memories" layer of a run's system prompt: the entries of the index that best
match the task, within a budget, each with where it came from.

The entries of the user's and the project's memory files are left out of the layer where
the memory layer shows the file whole already; a longer file is indexed as it is now first
(``remember`` appends to them). With an embeddings model, the task's own embedding is waited
for at most ``LAYER_SECONDS`` (0.25 s; see ``_embedder``): a run never waits longer on it.
"""

from __future__ import annotations

import datetime
import logging
import sqlite3
from pathlib import Path

from ..folder._project import Place, memory_files
from ..folder._prompt import FILE_LIMIT, Layer
from ._embedder import LAYER_SECONDS
from ._files import RECALLED, USER_SCOPE, sync_memory_files
from ._index import MemoryEntry, MemoryIndex

log = logging.getLogger(__name__)

__all__ = ["RECALL_CHARS", "recall", "recall_layer", "recalled_text"]

#: The characters the layer takes (each entry cut to a share of them).
RECALL_CHARS = 6_000
_ENTRY_CHARS = 800


async def recall(index: MemoryIndex, task: str, place: Place, shown_whole: int) -> list[MemoryEntry]:
    """The entries recalled for ``task`` in ``place``: the user's and its project's, best
    first; those of memory files no longer than ``shown_whole`` bytes (the memory layer
    shows them whole) left out, so only a longer file is indexed as it is now here (a
    dispatch reads each of the folder's files once: the prompt has read the others)."""
    files = memory_files(place.root)
    whole = [str(p) for p in files.values() if _size(p) <= shown_whole]
    if len(whole) < len(files):
        await sync_memory_files(index, place)
    return await index.search(task, [USER_SCOPE, str(place.root)], RECALLED, leave_out=whole, embed_within=LAYER_SECONDS)


def recalled_text(entries: list[MemoryEntry]) -> str:
    """The layer's text ("" for no entry), within :data:`RECALL_CHARS`."""
    if not entries:
        return ""
    lines = ["Similar memories (recalled for this task from earlier work; each says where it came from):"]
    used = len(lines[0])
    for entry in entries:
        text = " ".join(entry.text.split())
        if len(text) > _ENTRY_CHARS:
            text = text[: _ENTRY_CHARS - 1] + "…"
        when = datetime.date.fromtimestamp(entry.created).isoformat()
        line = f"- [{entry.kind}, {entry.source}, {when}] {text}"
        if used + len(line) > RECALL_CHARS:
            break
        lines.append(line)
        used += len(line) + 1
    lines.append("(The recall tool searches for more.)")
    return "\n".join(lines)


async def recall_layer(index: MemoryIndex | None, use: str, task: str, place: Place) -> list[Layer]:
    """The "similar memories" layer of a run of ``task`` in ``place`` whose agent's memory
    is ``use`` (none when it is ``off``, when nothing matches, or when the index fails: a
    run never waits on recall going wrong)."""
    if index is None or use == "off" or not task.strip():
        return []
    try:
        entries = await recall(index, task, place, FILE_LIMIT)
    except sqlite3.Error as exc:
        log.warning("%s: nothing recalled: the memory index failed: %s", place.cwd, exc)
        return []
    text = recalled_text(entries)
    return [Layer("similar memories", text, ", ".join(dict.fromkeys(e.source for e in entries)))] if text else []


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
