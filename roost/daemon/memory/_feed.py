"""What runs leave in memory: each finished task with its final answer, each compaction's
summary, and what a run that learns was found to hold (``_learning``), indexed from the
events as they are stored (one task does the work, off the runs' way, as the transcripts'
writer does)."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import trio

from roost.loop import Event

from ..folder._project import project_root
from ._files import USER_SCOPE
from ._index import MemoryIndex
from ._learning import Learning, RunRecord, proposed_facts

__all__ = ["MemoryFeed", "SUCCESS", "scope_of"]

log = logging.getLogger(__name__)

#: The events indexed whether or not a run learns.
_INDEXED = frozenset({"run.started", "run.finished", "compacted"})
#: How a run ends when its answer is worth recalling.
SUCCESS = frozenset({"done", "check_passed"})


def scope_of(cwd: str) -> str:
    """The scope of a session in ``cwd``: its project's root. Looks at the file system."""
    return str(project_root(cwd) or Path(cwd))


class MemoryFeed:
    """Stored events in, entries out (see the module)."""

    def __init__(self, index: MemoryIndex | None, publish: Callable[[dict[str, Any]], None] | None = None) -> None:
        #: Where entries go (None: nowhere; nothing is kept).
        self.index = index
        self._publish = publish
        self._pending: list[tuple[str, str, Sequence[Event], Learning | None]] = []
        self._wake = trio.Event()
        #: The task of each run in flight, by run id (a session's own runs).
        self._tasks: dict[str, str] = {}
        #: The record of each run in flight that learns, by run id.
        self._records: dict[str, RunRecord] = {}

    def add(self, session: str, cwd: str, events: Sequence[Event], learning: Learning | None = None) -> None:
        """Stored events of ``session`` (cheap: the feed's task does the work); ``learning``:
        how its run learns (None: it does not)."""
        if self.index is not None and (learning is not None or any(e.type in _INDEXED for e in events)):
            self._pending.append((session, cwd, events, learning))
            self._wake.set()

    async def run(self) -> None:
        """Forever: what was added, indexed."""
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            batch, self._pending = self._pending, []
            for session, cwd, events, learning in batch:
                try:
                    await self._index(session, cwd, events, learning)
                except Exception:
                    # Recall is a help: its failure must cost no run.
                    log.exception("session %s: its events could not be indexed for recall", session)

    async def _index(self, session: str, cwd: str, events: Sequence[Event], learning: Learning | None) -> None:
        assert self.index is not None
        for event in events:
            if event.data.get("path"):
                continue  # a sub-agent's: its caller's answer says what came of it
            run = event.run or ""
            if event.type == "run.started" and event.data.get("mode") != "compact":
                self._tasks[run] = str(event.data.get("task", ""))
                if learning is not None:
                    self._records[run] = RunRecord(learning)
            if run in self._records:
                self._records[run].take(event.type, event.data)
            if event.type == "run.finished":
                task = self._tasks.pop(run, None)
                record = self._records.pop(run, None)
                answer = str(event.data.get("text") or "").strip()
                if task and event.data.get("reason") in SUCCESS:
                    scope = await trio.to_thread.run_sync(scope_of, cwd)
                    if answer:
                        await self.index.add(scope, "task", f"Task: {task}\nAnswer: {answer}", f"session {session}", event.ts)
                    if record is not None:
                        await self._learn(session, run, scope, record)
            elif event.type == "compacted" and event.data.get("summary"):
                scope = await trio.to_thread.run_sync(scope_of, cwd)
                await self.index.add(scope, "summary", str(event.data["summary"]), f"session {session}", event.ts)

    async def _learn(self, session: str, run: str, scope: str, record: RunRecord) -> None:
        """What the run was found to hold, kept as entries, and said to the session's clients."""
        assert self.index is not None
        kept = []
        for fact, where in await proposed_facts(record):
            if where == "user" and not record.learning.user_scope:
                log.info("session %s: not learned into the user's memory (the folder is not trusted): %s", session, fact)
                continue
            target = USER_SCOPE if where == "user" else scope
            entry = await self.index.add(target, "learned", fact, f"session {session} run {run}")
            if entry is not None:
                kept.append({"id": entry, "text": fact, "scope": where})
        if kept and self._publish is not None:
            self._publish({"type": "memory.learned", "session": session, "run": run, "ts": time.time(), "entries": kept})
