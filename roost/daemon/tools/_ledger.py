"""A ledger of tool process groups in flight, so that a daemon that was killed leaves none.

The groups are those of unsandboxed commands and hooks, and each run's sandbox (its bwrap,
whose pid namespace holds the run's sandboxed commands: see ``sandbox.RunSandbox``).

Design: one append-only journal file, ``journal``, in a private folder next to the socket,
kept open for the daemon's life. A tool's group is added when it spawns (a line ``+PID
START``, START the leader's start time) and removed when it is gone (``-PID``); once no group
is in flight the file is cut back to nothing, so it stays a few lines long. A daemon that dies
without cleaning up (``kill -9``) leaves lines behind; the next daemon kills each group whose
leader is still the same process (same pid *and* start time, so a recycled pid is never hit)
before it serves. Two small appends per tool call cost a couple of microseconds, where a file
per group (created, then unlinked) cost ~130 µs and a database write would add a commit.

Files of the former layout (one per group, named by its pid and holding the start time),
left by an older daemon, are read and ended the same way.
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path

from .._paths import ensure_private_dir, private_opener

log = logging.getLogger(__name__)

#: Lines after which the journal is rewritten with only the groups in flight (it is cut to
#: nothing whenever none is, so this only happens while one group outlives thousands).
_COMPACT_AFTER = 4096


class ProcessLedger:
    """Tool process groups in flight, journaled.

    Resource handling:
        The journal is opened at the first :meth:`add` and kept open; :meth:`close` closes it.
    """

    def __init__(self, folder: Path) -> None:
        """Use ``folder`` (made private: see :func:`ensure_private_dir`).

        Raises:
            NotPrivate: the folder is a symbolic link, another user's, or open to others.
        """
        self.folder = folder
        self.journal = folder / "journal"
        ensure_private_dir(folder)
        self._fd: int | None = None
        self._live: dict[int, int | None] = {}
        self._lines = 0

    def add(self, pid: int) -> None:
        """Record the group led by ``pid`` (just spawned with a new session)."""
        start = _start_time(pid)
        self._live[pid] = start
        self._append(f"+{pid} {start}\n")

    def remove(self, pid: int) -> None:
        """Forget the group led by ``pid``; it has ended."""
        if self._live.pop(pid, False) is False:
            return
        if not self._live:
            # Nothing in flight: nothing a next daemon would have to end.
            os.ftruncate(self._open(), 0)
            self._lines = 0
        elif self._lines >= _COMPACT_AFTER:
            self._rewrite()
        else:
            self._append(f"-{pid}\n")

    def recorded(self) -> dict[int, int | None]:
        """The groups the files say are in flight: pid -> leader's start time (None if it
        was unknown). What a daemon starting now would end."""
        groups: dict[int, int | None] = {}
        try:
            text = self.journal.read_text()
        except FileNotFoundError:
            text = ""
        for line in text.splitlines():
            # A line cut short by a crash names no start time that matches: never killed.
            if line.startswith("+"):
                pid, _, start = line[1:].partition(" ")
                if pid.isdigit():
                    groups[int(pid)] = int(start) if start.isdigit() else None
            elif line.startswith("-") and line[1:].isdigit():
                groups.pop(int(line[1:]), None)
        for entry in self.folder.iterdir():  # the former layout: a file per group
            if entry.name.isdigit():
                recorded = entry.read_text().strip()
                groups[int(entry.name)] = int(recorded) if recorded.isdigit() else None
        return groups

    def end_leftovers(self) -> list[int]:
        """Kill the groups an earlier daemon left running; return their pids."""
        killed = []
        for pid, recorded in self.recorded().items():
            current = _start_time(pid)
            if current is not None and current == recorded:
                try:
                    os.killpg(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    pass
        for entry in self.folder.iterdir():
            if entry.name.isdigit():
                entry.unlink()
        if self._live:
            self._rewrite()
        elif self.journal.exists():
            os.ftruncate(self._open(), 0)
            self._lines = 0
        if killed:
            log.warning("killed tool process groups left by an earlier daemon: %s", killed)
        return killed

    def close(self) -> None:
        """Close the journal. Idempotent."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> int:
        if self._fd is None:
            self._fd = private_opener(os.fspath(self.journal), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        return self._fd

    def _append(self, line: str) -> None:
        os.write(self._open(), line.encode())
        self._lines += 1

    def _rewrite(self) -> None:
        """The journal holding only the groups in flight (written aside, then renamed)."""
        fresh = self.folder / "journal.new"
        fd = private_opener(os.fspath(fresh), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            os.write(fd, "".join(f"+{pid} {start}\n" for pid, start in self._live.items()).encode())
        finally:
            os.close(fd)
        os.replace(fresh, self.journal)
        self.close()  # the old file's descriptor: reopened on the new one
        self._lines = len(self._live)


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), or None if unknown."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        stat = os.read(fd, 4096).decode(errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)
    # Fields after the command name, which may itself hold spaces and parentheses.
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])
