"""Looking at processes from tests: is a pid still running (zombies count as gone)."""

from __future__ import annotations

from pathlib import Path


def proc_state(pid: int) -> str | None:
    """The state letter of ``pid`` (R, S, Z, ...), or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (orphans may not be reaped in a container)."""
    return proc_state(pid) not in (None, "Z", "X")


def with_marker(marker: str) -> list[int]:
    """Live processes whose command line contains ``marker`` (a sandboxed command's own pids
    are its namespace's, so tests find its processes this way)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and alive(int(entry.name)):
            found.append(int(entry.name))
    return found
