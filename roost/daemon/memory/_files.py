"""The memory files in the index: the user's and a project's, as they are now."""

from __future__ import annotations

from ..folder._project import Place, memory_files
from ._index import MemoryIndex

__all__ = ["RECALLED", "USER_SCOPE", "sync_memory_files"]

#: The scope of what the user remembers for every project.
USER_SCOPE = "user"
#: Entries a recall gives at most, unless it says.
RECALLED = 8


async def sync_memory_files(index: MemoryIndex, place: Place) -> None:
    """Index the user's and ``place``'s project's memory files as they are now (a project's
    file only if it is really inside the project, unless the project is trusted, as the
    prompt reads it)."""
    files = memory_files(place.root)
    within = None if place.trusted else place.root
    await index.sync_files([(USER_SCOPE, files["user"], None), (str(place.root), files["project"], within)])
