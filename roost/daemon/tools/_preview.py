"""What an edit or a write would change, as a unified diff, for the person asked to approve
it. Blocking (it reads the file): the conductor calls it in a worker thread. The file is read
as the tools read it (``_fs``): nothing in ``/proc``, ``/sys`` or ``/dev`` (the daemon's
environment would land in the request, and in the session's events), no link followed at
the open."""

from __future__ import annotations

import os
from typing import Any, Mapping

from ..folder._files import read_bounded
from ._edit import EDIT_LIMIT
from ._diffs import unified
from ._fs import open_path, resolve


def change_preview(cwd: str, name: str, input: Mapping[str, Any]) -> str | None:
    """The diff an ``edit`` or ``write`` call would make (None: another tool, or nothing to
    show: a file that cannot be read, an edit that would fail)."""
    path = input.get("path")
    if name not in ("edit", "write") or not isinstance(path, str):
        return None
    try:
        real = resolve(os.path.expanduser(path), cwd)
        before = read_bounded(real, EDIT_LIMIT, opener=open_path).decode("utf-8", errors="replace")
    except FileNotFoundError:
        before = ""
    except (OSError, ValueError):
        return None
    if name == "write":
        after = input.get("content")
    else:
        old, new = input.get("old"), input.get("new")
        if not isinstance(old, str) or not isinstance(new, str) or not old or old not in before:
            return None
        after = before.replace(old, new) if input.get("replace_all") else before.replace(old, new, 1)
    if not isinstance(after, str):
        return None
    return unified(before, after, path)
