"""What the daemon remembers across sessions, and recalls for a task (see ``_index``)."""

from ._entries import entry_spans, fts_query, split_entries
from ._index import KINDS, MemoryEntry, MemoryIndex

__all__ = ["KINDS", "MemoryEntry", "MemoryIndex", "entry_spans", "fts_query", "split_entries"]
