"""Finding the pid of a stdio server the SDK started.

``stdio_client`` keeps its process to itself, so each server is started with a marker in its
environment (``ROOST_MCP_SERVER=<unique id>``) and found among this process's children by
that marker. Look only once the server has answered: just after the spawn the child may still
be inside exec, with its new environment not yet readable. Linux only (``/proc``); elsewhere
the pid is unknown (None).
"""

from __future__ import annotations

import os
from pathlib import Path

#: The variable that marks a server process; its value is unique per start.
MARKER = "ROOST_MCP_SERVER"


def find_child(marker: str) -> int | None:
    """The pid of this process's child started with ``ROOST_MCP_SERVER=marker``, or None."""
    proc = Path("/proc")
    needle = f"{MARKER}={marker}".encode()
    me = os.getpid()
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return None
    for entry in entries:
        try:
            stat = (proc / entry / "stat").read_text()
            # The command name (in parentheses) may hold spaces: fields after the last ")".
            if int(stat.rsplit(")", 1)[1].split()[1]) != me:
                continue
            environ = (proc / entry / "environ").read_bytes()
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile, or not ours to read
        if needle in environ.split(b"\0"):
            return int(entry)
    return None
