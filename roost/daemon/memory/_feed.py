"""What runs leave in memory: each finished task with its final answer, and each
compaction's summary, indexed from the events as they are stored (one task does the work,
off the runs' way, as the transcripts' writer does)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import trio

from roost.loop import Event

from ..folder._project import project_root
from ._index import MemoryIndex

__all__ = ["MemoryFeed", "SUCCESS", "scope_of"]

log = logging.getLogger(__name__)

#: How a run ends when its answer is worth recalling.
SUCCESS = frozenset({"done", "check_passed"})


def scope_of(cwd: str) -> str:
    """The scope of a session in ``cwd``: its project's root. Looks at the file system."""
    return str(project_root(cwd) or Path(cwd))


class MemoryFeed:
    """Stored events in, entries out (see the module)."""

    def __init__(self, index: MemoryIndex | None) -> None:
        #: Where entries go (None: nowhere; nothing is kept).
        self.index = index
        self._pending: list[tuple[str, str, Sequence[Event]]] = []
        self._wake = trio.Event()
        #: The task of each run in flight, by run id (a session's own runs).
        self._tasks: dict[str, str] = {}

    def add(self, session: str, cwd: str, events: Sequence[Event]) -> None:
        """Stored events of ``session`` (cheap: the feed's task does the work)."""
        if self.index is not None and any(e.type in ("run.started", "run.finished", "compacted") for e in events):
            self._pending.append((session, cwd, events))
            self._wake.set()

    async def run(self) -> None:
        """Forever: what was added, indexed."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            batch, self._pending = self._pending, []
            for session, cwd, events in batch:
                try:
                    await self._index(session, cwd, events)
                except Exception:
                    # Recall is a help: its failure must cost no run.
                    log.exception("session %s: its events could not be indexed for recall", session)

    async def _index(self, session: str, cwd: str, events: Sequence[Event]) -> None:
        assert self.index is not None
        for event in events:
            if event.data.get("path"):
                continue  # a sub-agent's: its caller's answer says what came of it
            if event.type == "run.started" and event.data.get("mode") != "compact":
                self._tasks[event.run or ""] = str(event.data.get("task", ""))
            elif event.type == "run.finished":
                task = self._tasks.pop(event.run or "", None)
                answer = str(event.data.get("text") or "").strip()
                if task and answer and event.data.get("reason") in SUCCESS:
                    scope = await trio.to_thread.run_sync(scope_of, cwd)
                    await self.index.add(scope, "task", f"Task: {task}\nAnswer: {answer}", f"session {session}", event.ts)
            elif event.type == "compacted" and event.data.get("summary"):
                scope = await trio.to_thread.run_sync(scope_of, cwd)
                await self.index.add(scope, "summary", str(event.data["summary"]), f"session {session}", event.ts)
