"""Background commands: ``bash`` with ``run_in_background``, read by ``bash_output`` and
ended by ``kill_shell`` (Claude Code's ``BashOutput`` and ``KillShell``).

A background command starts exactly as a foreground one does (``_bash.start_command``: in
the run's sandbox, or unsandboxed in a process group of its own that the process ledger
records), and the call returns at once with its id. A task in the run's nursery reads its
output and waits for it to exit; when it exits, what it left in its process group is
killed, as a foreground command's is when its call ends. Background commands end with
their run: the run's end cancels its nursery, and that task kills the command's group on
the way out (its sandbox ends with the run too). A daemon that shuts down ends every run
first; one killed with SIGKILL leaves its sandboxes to bwrap's ``--die-with-parent`` and
its unsandboxed groups to the next daemon's ledger, as it does foreground commands. A run
has at most :data:`MAX_RUNNING` of them at once.

Output: stdout and stderr together, kept in the daemon's state folder (``shells/``), which
commands never see (the sandbox hides it), in two files unlinked as soon as they are made,
so that nothing is left behind and no other process finds them. Each holds
:data:`SEGMENT` bytes; when the newer one is full the older is dropped, so the newest
``SEGMENT`` to ``2 * SEGMENT`` bytes are kept whatever the command writes, at no cost but
the page cache's (the writes are appends of at most 64 KiB, done from the event loop: the
page cache takes them in microseconds).

``bash_output`` returns what the command wrote since the last read of it, at most the
call's output limit: the newest part when there is more, with a note of what was not
shown. A ``filter`` (a regular expression, run on RE2 in linear time: see
``roost.loop.linear_regex``) keeps the lines that match; the others are consumed all the
same, as Claude Code's ``BashOutput`` does.
"""

from __future__ import annotations

import collections
import itertools
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import trio

from roost.loop import PatternError, Regex, linear_regex

from .._paths import ensure_private_dir, private_opener, state_dir
from ._base import Tool, ToolContext, ToolResult

if TYPE_CHECKING:
    from ._ledger import ProcessLedger
    from ._spawn import Process

#: Bytes in each of a command's two output files: the newest 4 to 8 MiB are kept.
SEGMENT = 4 << 20
#: Background commands of one run running at once.
MAX_RUNNING = 8
#: How long kill_shell waits for a killed command to be gone.
KILL_WAIT = 5.0
#: What a read with a filter scans at a time.
_BLOCK = 1 << 20


class _Output:
    """A command's output: the newest :data:`SEGMENT` to ``2 * SEGMENT`` bytes, in two
    unlinked files.

    Resource handling: the files' descriptors are held until :meth:`close`.
    """

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        #: Bytes the command wrote in all.
        self.total = 0
        #: The files: (descriptor, offset of its first byte in the whole output), older first.
        self._segments: list[tuple[int, int]] = [(self._segment(), 0)]

    def _segment(self) -> int:
        path = self._folder / secrets.token_hex(8)
        fd = private_opener(os.fspath(path), os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC)
        os.unlink(path)
        return fd

    @property
    def kept_from(self) -> int:
        """The offset of the oldest byte still kept."""
        return self._segments[0][1]

    def append(self, data: bytes) -> None:
        fd, start = self._segments[-1]
        if self.total - start >= SEGMENT:
            if len(self._segments) == 2:
                os.close(self._segments.pop(0)[0])
            fd = self._segment()
            self._segments.append((fd, self.total))
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        self.total += len(data)

    def snapshot(self) -> _Snapshot:
        """What is kept now, readable from a worker thread while more is appended."""
        return _Snapshot([(os.dup(fd), start) for fd, start in self._segments], self.total)

    def close(self) -> None:
        for fd, _ in self._segments:
            os.close(fd)
        self._segments = []


@dataclass(slots=True)
class _Snapshot:
    """A command's output as it was: its files' descriptors (duplicates, closed by
    :meth:`close`) and the bytes written then."""

    segments: list[tuple[int, int]]
    total: int

    def read(self, start: int, end: int) -> bytes:
        """The output's bytes ``start`` to ``end`` (blocking)."""
        parts = []
        bounds = [s for _, s in self.segments[1:]] + [self.total]
        for (fd, first), last in zip(self.segments, bounds):
            lo, hi = max(start, first), min(end, last)
            if lo < hi:
                parts.append(os.pread(fd, hi - lo, lo - first))
        return b"".join(parts)

    def close(self) -> None:
        for fd, _ in self.segments:
            os.close(fd)


@dataclass(eq=False)
class Shell:
    """One background command."""

    id: str
    command: str
    process: Process
    output: _Output
    #: Where its group is recorded (None: not recorded, or in the run's sandbox).
    ledger: ProcessLedger | None
    #: Its exit status once it has exited (negative: killed by that signal).
    status: int | None = None
    #: kill_shell ended it.
    killed: bool = False
    #: The offset of the first byte bash_output has not returned yet.
    read: int = 0
    exited: trio.Event = field(default_factory=trio.Event)

    def state(self) -> str:
        """How it stands, as bash_output and kill_shell say it."""
        if self.status is None:
            return f"{self.id} is still running"
        if self.killed:
            return f"{self.id} was killed"
        return f"{self.id} exited with status {self.status}"


class Shells:
    """The background commands of one run.

    Resource handling:
        Each command is watched by a task in ``nursery`` (the run's): when the nursery is
        cancelled the command's group is killed. :meth:`close` (once the nursery is done)
        closes their output files.
    """

    def __init__(self, nursery: trio.Nursery, folder: Path | None = None, running: set[Shell] | None = None) -> None:
        """Watch commands in ``nursery``, their output in ``folder``; each is in ``running``
        (shared by every run's, for the daemon's count) while it runs."""
        self._nursery = nursery
        self._folder = folder
        self._everywhere = running if running is not None else set()
        self._shells: dict[str, Shell] = {}
        self._ids = itertools.count(1)

    def running(self) -> int:
        """How many are running."""
        return sum(shell.status is None for shell in self._shells.values())

    def get(self, id: str) -> Shell | None:
        """The command ``id`` of this run, if any."""
        return self._shells.get(id)

    def ids(self) -> list[str]:
        """Every command's id, in the order they started."""
        return list(self._shells)

    async def start(self, command: str, ctx: ToolContext) -> ToolResult:
        """Start ``command`` in the background (as :func:`_bash.start_command` does); the
        result names its id, or says why it did not start."""
        from ._bash import start_command

        if self.running() >= MAX_RUNNING:
            return ToolResult(
                f"{MAX_RUNNING} background commands are running already; end one with kill_shell first",
                is_error=True,
            )
        folder = self._output_folder()
        begun = await start_command(command, ctx)
        if isinstance(begun, ToolResult):
            return begun
        process, recorded = begun
        shell = Shell(f"bg{next(self._ids)}", command, process, _Output(folder), ctx.ledger if recorded else None)
        self._shells[shell.id] = shell
        self._everywhere.add(shell)
        self._nursery.start_soon(self._watch, shell)
        return ToolResult(
            f"started {shell.id} in the background; bash_output reads what it writes, kill_shell ends it",
            meta={"shell": shell.id, "background": True},
        )

    async def kill(self, shell: Shell) -> None:
        """End ``shell``'s process group, and wait (bounded) until it is gone."""
        if shell.status is None:
            shell.killed = True
            shell.process.kill()
        with trio.move_on_after(KILL_WAIT):
            await shell.exited.wait()

    def close(self) -> None:
        """Close every command's output (they have all ended: the nursery is done)."""
        for shell in self._shells.values():
            shell.output.close()

    def _output_folder(self) -> Path:
        if self._folder is None:
            self._folder = state_dir() / "shells"
        ensure_private_dir(self._folder)
        return self._folder

    async def _watch(self, shell: Shell) -> None:
        process = shell.process
        try:
            async with trio.open_nursery() as inner:
                inner.start_soon(_pump, shell)
                shell.status = await process.wait()
                shell.exited.set()
                # What it left in its group ends with it, as a foreground command's does.
                process.kill()
        finally:
            with trio.CancelScope(shield=True):
                process.kill()
                if process.returncode is None:
                    await process.wait()
            if shell.status is None:
                shell.status = process.returncode
                shell.killed = True
            self._everywhere.discard(shell)
            shell.exited.set()
            if shell.ledger is not None:
                shell.ledger.remove(process.pid)


async def _pump(shell: Shell) -> None:
    async with shell.process.stdout as stream:
        while chunk := await stream.receive_some(65536):
            shell.output.append(chunk)


def _new_text(snapshot: _Snapshot, start: int, regex: Regex | None, limit: int) -> tuple[str, int, int]:
    """What was written from ``start`` on (the lines ``regex`` finds something in, if
    any), at most ``limit`` characters of it, the newest; how many of those bytes were no
    longer kept; and how many bytes (lines, with ``regex``) were not shown (blocking)."""
    first, end = max(start, snapshot.segments[0][1]), snapshot.total
    lost = first - start
    if regex is None:
        # A character takes at most 4 bytes: enough to show ``limit`` of them.
        head = max(first, end - limit * 4)
        text = snapshot.read(head, end).decode("utf-8", errors="replace")
        skipped = head - first
        if len(text) > limit:
            skipped += len(text[:-limit].encode())
            text = text[-limit:]
        return text, lost, skipped
    search = regex.search
    kept: collections.deque[str] = collections.deque()
    size = skipped = 0

    def take(raw: bytes) -> None:
        nonlocal size, skipped
        line = raw.decode("utf-8", errors="replace")
        if search(line):
            kept.append(line)
            size += len(line) + 1
            while size > limit:
                size -= len(kept.popleft()) + 1
                skipped += 1

    carry = b""
    for at in range(first, end, _BLOCK):
        *lines, carry = (carry + snapshot.read(at, min(at + _BLOCK, end))).split(b"\n")
        for raw in lines:
            take(raw)
    if carry:
        take(carry)  # a line not ended yet: it is consumed as it is
    return "".join(f"{line}\n" for line in kept), lost, skipped


# -- the tools --------------------------------------------------------------------------------


def _find(input: Mapping[str, Any], ctx: ToolContext) -> Shell | ToolResult:
    shell = ctx.shells.get(input["id"]) if ctx.shells is not None else None
    if shell is None:
        ids = ", ".join(ctx.shells.ids()) if ctx.shells is not None else ""
        known = f" (this run's: {ids})" if ids else " (this run started none)"
        return ToolResult(f"no background command {input['id']!r}{known}", is_error=True)
    return shell


async def _run_output(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    shell = _find(input, ctx)
    if isinstance(shell, ToolResult):
        return shell
    regex = None
    if isinstance(input.get("filter"), str):
        try:
            regex = linear_regex(input["filter"])
        except PatternError as exc:
            return ToolResult(f"the filter cannot be used: {exc}", is_error=True)
    start, snapshot = shell.read, shell.output.snapshot()
    shell.read = snapshot.total
    try:
        text, lost, skipped = await ctx.in_thread(_new_text, snapshot, start, regex, ctx.output_limit)
    finally:
        snapshot.close()
    notes = []
    if lost:
        notes.append(f"[... {lost} bytes written since the last read were dropped: at most the newest {2 * SEGMENT >> 20} MiB are kept]")
    if skipped:
        what = "lines that matched" if regex is not None else "bytes"
        notes.append(f"[... {skipped} earlier {what} not shown]")
    if not text:
        notes.append("(no new output)" if regex is None else "(no new line matched)")
    shown = "\n".join(notes + ([text.rstrip("\n")] if text else []))
    meta: dict[str, Any] = {"shell": shell.id, "running": shell.status is None, "bytes": snapshot.total - start}
    if shell.status is not None:
        meta["exit_status"] = shell.status
    return ToolResult(f"{shown}\n[{shell.state()}]", meta=meta)


async def _run_kill(input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    shell = _find(input, ctx)
    if isinstance(shell, ToolResult):
        return shell
    if shell.status is not None:
        return ToolResult(f"{shell.state()} already", meta={"shell": shell.id, "exit_status": shell.status})
    assert ctx.shells is not None
    await ctx.shells.kill(shell)
    return ToolResult(f"killed {shell.id}", meta={"shell": shell.id, "exit_status": shell.status})


_ID = {"type": "string", "minLength": 1, "description": "the id bash returned when it started the command"}

BASH_OUTPUT = Tool(
    "bash_output",
    "Read what a background command (bash with run_in_background) wrote since the last read "
    "of it, and whether it is still running or how it ended. With filter (a regular "
    "expression) only the lines that match are shown; the others are consumed all the same.",
    {
        "type": "object",
        "properties": {
            "id": _ID,
            "filter": {"type": "string", "description": "a regular expression: show only the lines it matches"},
        },
        "required": ["id"],
        "additionalProperties": False,
    },
    _run_output,
    read_only=True,
)

KILL_SHELL = Tool(
    "kill_shell",
    "End a background command (bash with run_in_background) of this run, and everything it "
    "started.",
    {"type": "object", "properties": {"id": _ID}, "required": ["id"], "additionalProperties": False},
    _run_kill,
)
