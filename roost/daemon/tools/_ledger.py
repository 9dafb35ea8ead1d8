"""A ledger of tool process groups in flight, so that a daemon that was killed leaves none.

Design: one small file per process group, named by its pid and holding the process's start
time, in a private folder next to the socket. A tool adds its group when it spawns and
removes it when the group is gone. A daemon that dies without cleaning up (``kill -9``)
leaves the files behind; the next daemon kills each group whose leader is still the same
process (same pid *and* start time, so a recycled pid is never hit) before it serves.
Files cost microseconds, where a database write would add a commit to every tool call.
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

from .._paths import ensure_private_dir, private_opener

log = logging.getLogger(__name__)


class ProcessLedger:
    """Tool process groups in flight, one file each."""

    def __init__(self, folder: Path) -> None:
        """Use ``folder`` (made private: see :func:`ensure_private_dir`).

        Raises:
            NotPrivate: the folder is a symbolic link, another user's, or open to others.
        """
        self.folder = folder
        ensure_private_dir(folder)

    def add(self, pid: int) -> None:
        """Record the group led by ``pid`` (just spawned with a new session)."""
        with open(self.folder / str(pid), "w", opener=private_opener) as file:
            file.write(str(_start_time(pid)))

    def remove(self, pid: int) -> None:
        """Forget the group led by ``pid``; it has ended."""
        try:
            (self.folder / str(pid)).unlink()
        except FileNotFoundError:
            pass

    def end_leftovers(self) -> list[int]:
        """Kill the groups an earlier daemon left running; return their pids."""
        killed = []
        for entry in self.folder.iterdir():
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            recorded = entry.read_text().strip()
            current = _start_time(pid)
            if current is not None and str(current) == recorded:
                try:
                    os.killpg(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    pass
            entry.unlink()
        if killed:
            log.warning("killed tool process groups left by an earlier daemon: %s", killed)
        return killed


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), or None if unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the command name, which may itself hold spaces and parentheses.
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])
