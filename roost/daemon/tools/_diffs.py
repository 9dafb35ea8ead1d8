"""A change to a file as a unified diff, bounded: what an edit or write would change (the
approval's preview) and what one changed (the tool's result's ``meta.diff``), shown to the
people watching, never to the model."""

from __future__ import annotations

import difflib
import os

#: At most this much of a diff is shown.
PREVIEW_LINES = 80
PREVIEW_CHARS = 8000


def unified(before: str, after: str, path: str) -> str | None:
    """The unified diff from ``before`` to ``after`` of the file at ``path``, at most
    :data:`PREVIEW_LINES` lines (None: no change). Text that is not UTF-8 (surrogate
    escapes) is shown as U+FFFD: the diff is stored in the session's events."""
    shown = os.path.normpath(path)
    lines = list(
        difflib.unified_diff(
            before.splitlines(), after.splitlines(), f"a/{shown}", f"b/{shown}", n=2, lineterm=""
        )
    )
    text = "\n".join(lines[:PREVIEW_LINES])
    if len(lines) > PREVIEW_LINES:
        text += f"\n... ({len(lines) - PREVIEW_LINES} more lines)"
    text = text.encode("utf-8", errors="surrogateescape").decode("utf-8", errors="replace")
    return text[:PREVIEW_CHARS] or None
