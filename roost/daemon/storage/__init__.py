"""What the daemon keeps on disk: the event store (SQLite), blobs, and session files.

:class:`EventStore` is the store's one face (``_store.py`` says how its parts divide the
work); what it raises is a :class:`StoreError`.
"""

from ._store import EventStore, SessionRow, StoreDamaged, StoreError, StoreFull, set_aside

__all__ = [
    "EventStore",
    "SessionRow",
    "StoreDamaged",
    "StoreError",
    "StoreFull",
    "set_aside",
]
