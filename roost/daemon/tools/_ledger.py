"""A ledger of tool process groups in flight, so that a daemon that was killed leaves none.

The groups are those of unsandboxed commands and hooks, and each run's sandbox (its bwrap,
whose pid namespace holds the run's sandboxed commands: see ``sandbox.RunSandbox``).

Design: one append-only journal file, ``journal``, in a private folder next to the socket,
kept open for the daemon's life. A tool's group is added when it spawns (a line ``+PID BY
BOOT``) and removed when it is gone (``-PID``); once no group is in flight the file is cut
back to nothing, so it stays a few lines long. A daemon that dies without cleaning up
(``kill -9``) leaves lines behind; the next daemon kills each group whose leader is still the
same process before it serves. Two small appends per tool call cost a couple of
microseconds, where a file per group (created, then unlinked) cost ~130 µs and a database
write would add a commit.

The same process, never a recycled pid: BY is the clock (in the ticks since boot that
``/proc/PID/stat`` counts a start time in) read just after the spawn, so the leader started
no later than BY; and BOOT is the boot it was in. A process that has the pid later started
after the leader was reaped, so after BY; one that had it before is gone. Only a live
process of this boot with that pid that started by BY is the leader. The leader's own start
time is not read at the spawn: ``/proc/PID/stat`` of a child still loading its program
blocks until it is loaded (up to a millisecond, the whole event loop waiting).

Lines of the former format (``+PID START``, the leader's exact start time) and files of the
layout before it (one per group, named by its pid and holding the start time), left by an
older daemon, are read and ended by that exact start time.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from .._paths import ensure_private_dir, private_opener

log = logging.getLogger(__name__)

#: Lines after which the journal is rewritten with only the groups in flight (it is cut to
#: nothing whenever none is, so this only happens while one group outlives thousands).
_COMPACT_AFTER = 4096
_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Leader:
    """What the journal says of a group's leader: its start time in clock ticks since
    boot, exactly (``exact``) or at the latest."""

    start: int
    exact: bool = False

    def is_(self, start: int | None) -> bool:
        """Whether a live process of this boot with the leader's pid, started at ``start``
        (None: unknown), is the leader."""
        if start is None:
            return False
        return start == self.start if self.exact else start <= self.start


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
        self._live: dict[int, int] = {}
        self._lines = 0
        self._boot = _boot_id()

    def add(self, pid: int) -> None:
        """Record the group led by ``pid``, spawned just now with a new session."""
        # One tick more: the float clock read here may round below the kernel's own count.
        by = int(time.clock_gettime(time.CLOCK_BOOTTIME) * _TICKS) + 1
        self._live[pid] = by
        self._append(f"+{pid} {by} {self._boot}\n")

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

    def recorded(self) -> dict[int, Leader]:
        """The groups of this boot the files say are in flight, by their leaders' pids: what
        a daemon starting now would end."""
        groups: dict[int, Leader] = {}
        try:
            text = self.journal.read_text()
        except FileNotFoundError:
            text = ""
        # The last piece has no newline: a line cut short by a crash, never read.
        for line in text.split("\n")[:-1]:
            fields = line[1:].split(" ")
            if line.startswith("-") and line[1:].isdigit():
                groups.pop(int(line[1:]), None)
            elif not line.startswith("+") or not all(f.isdigit() for f in fields[:2]):
                continue
            elif len(fields) == 3 and fields[2] == self._boot:
                groups[int(fields[0])] = Leader(int(fields[1]))
            elif len(fields) == 2:  # the former format
                groups[int(fields[0])] = Leader(int(fields[1]), exact=True)
        for entry in self.folder.iterdir():  # the layout before: a file per group
            if entry.name.isdigit():
                recorded = entry.read_text().strip()
                if recorded.isdigit():
                    groups[int(entry.name)] = Leader(int(recorded), exact=True)
        return groups

    def end_leftovers(self) -> list[int]:
        """Kill the groups an earlier daemon left running; return their pids."""
        killed = []
        for pid, leader in self.recorded().items():
            if leader.is_(_start_time(pid)):
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
            os.write(fd, "".join(f"+{pid} {by} {self._boot}\n" for pid, by in self._live.items()).encode())
        finally:
            os.close(fd)
        os.replace(fresh, self.journal)
        self.close()  # the old file's descriptor: reopened on the new one
        self._lines = len(self._live)


def _boot_id() -> str:
    """This boot's id (Linux), or a stand-in where there is none: lines of another boot are
    then told apart by nothing but their start times."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or "-"
    except OSError:
        return "-"


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
