"""A session's transcript as Claude Code writes one: JSON lines a hook reads at
``transcript_path``.

Each conversation entry is a line ``{"parentUuid", "isSidechain", "userType", "cwd",
"sessionId", "version", "type", "message", "uuid", "timestamp"}``: ``type`` ``user`` with
``message.content`` the text (a task, steering, a hook's words) or ``tool_result`` blocks,
``assistant`` with the reply's ``text`` and ``tool_use`` blocks (tools and inputs in Claude
Code's names, see ``folder._claude``). Lines are compact JSON (scripts grep for
``"role":"assistant"``). A sub-agent's entries go to a file of their own
(``<session>/subagents/agent-<id>.jsonl``), ``isSidechain`` true. Each line also carries
``roostSeq``, the event it came from, so that a daemon that starts again goes on where the
file ends (the events stored since are written from the store).

The files live in the daemon's state folder (``transcripts/``, 0700; each file 0600): the
user's own hooks read them there, and a run's sandbox shows its session's file read-only to
its commands (a project's hooks run there), never another session's.

Writing is off the conductor's way: :meth:`Transcripts.add` keeps the stored events that
make lines (no work per event but a list append), one writer task gathers them for up to
:data:`GATHER` seconds, turns them into lines and appends them in a worker thread, and
:meth:`Transcripts.sync` waits until what was added is on disk (a hook runs only after that;
it does not wait for the gathering).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Awaitable, Callable, Iterable, Mapping, Sequence

import trio

import roost
from roost.loop import Event

from .._paths import ensure_private_dir, private_opener, state_dir
from ..storage._store import SessionRow
from ..folder import _claude as claude

log = logging.getLogger(__name__)

#: The events that make lines, and how much of a file's end is read to go on from it.
_CONVERSATION = frozenset({"message.user", "message.assistant", "tool.finished", "compacted", "run.started"})
_TAIL = 1 << 16
#: Events read from the store at a time when a file is caught up.
_PAGE = 2000
_NAMESPACE = uuid.UUID("6f1c8a52-54c4-4f43-9d0a-3b1e2f3c7a10")
#: Seconds the writer gathers what is added before it writes (see :meth:`Transcripts.run`).
GATHER = 0.05

History = Callable[[str, int, int], Awaitable[list[Event]]]


def transcripts_dir() -> Path:
    """Where the transcripts live: ``transcripts/`` in the daemon's state folder."""
    return state_dir() / "transcripts"


class Transcripts:
    """The sessions' transcript files, kept current as events are stored.

    Args:
        history: the store's events of a session after a seq (at most a limit), to write
            what a file lacks when this daemon first writes to it.
        folder: where the files go (default :func:`transcripts_dir`).
    """

    def __init__(self, history: History, folder: Path | None = None) -> None:
        self._history = history
        self._folder = folder if folder is not None else transcripts_dir()
        # (session, cwd, the events that make lines, the lowest seq of the events stored with them)
        self._pending: list[tuple[str, str, Sequence[Event], int]] = []
        self._wake = trio.Event()
        self._added = 0
        self._written = 0
        self._progress = trio.Event()
        self._urgent = trio.Event()
        # Per file: (last uuid, last seq, model), as this daemon last wrote it.
        self._ends: dict[Path, tuple[str | None, int, str]] = {}
        self._caught_up: set[str] = set()
        # The folders made private already (only the writer's thread uses it).
        self._folders: set[Path] = set()

    def shown(self, session: str) -> tuple[str, str]:
        """What a run of ``session`` may read of the transcripts: its own file, and the
        folder of its sub-agents'."""
        transcript = self.path(session)
        return transcript, transcript.removesuffix(".jsonl")

    def path(self, session: str, agent: str | None = None) -> str:
        """The transcript of ``session`` (or of its sub-agent ``agent``: a call id)."""
        if agent is None:
            return str(self._folder / f"{session}.jsonl")
        return str(self._folder / session / "subagents" / f"agent-{agent}.jsonl")

    def add(self, session: str, cwd: str, events: Sequence[Event]) -> None:
        """Stored events of ``session`` to write (cheap: the writer task does the work)."""
        lines = [event for event in events if event.type in _CONVERSATION]
        if not lines:
            return
        # The file is caught up to the first of them (see run), lines or not.
        first = min((e.seq for e in events if e.seq is not None), default=1)
        self._pending.append((session, cwd, lines, first))
        self._added += 1
        self._wake.set()

    def created(self, session: str) -> None:
        """``session`` was made just now: its transcript has nothing to catch up (its file
        is not read, nor its history, when its first lines are written)."""
        self._caught_up.add(session)
        self._ends[Path(self.path(session))] = (None, 0, "")

    async def sync(self, session: str) -> str:
        """Wait until what was added so far is written; the session's transcript (made,
        empty, if nothing was written yet)."""
        await self._flushed()
        path = Path(self.path(session))
        if not path.exists():
            await trio.to_thread.run_sync(self._touch, path)
        return str(path)

    async def deleted(self, rows: Iterable[SessionRow]) -> None:
        """Delete the transcripts of the sessions ``rows`` lists (deleted from the store),
        their sub-agents' with them, once what was added for them is written (else the
        writer would make them again)."""
        sessions = [row.id for row in rows]
        await self._flushed()
        paths = [Path(self.path(s)) for s in sessions]
        for session in sessions:
            self._caught_up.discard(session)
        for path in paths:
            self._ends = {p: end for p, end in self._ends.items() if p != path and path.with_suffix("") not in p.parents}
        await trio.to_thread.run_sync(_remove, paths)

    async def _flushed(self) -> None:
        """Wait until what was added so far is written, the writer told not to gather."""
        target = self._added
        while self._written < target:
            self._urgent.set()
            await self._progress.wait()

    async def run(self) -> None:
        """The writer: forever, what was added, written (in a worker thread)."""
        while True:
            await self._wake.wait()
            # A step's lines come in a few adds milliseconds apart: gathered for a moment,
            # they cost one trip to a worker thread (about 100 µs of CPU) instead of one
            # each; unless someone waits for them (a hook about to read the file).
            with trio.move_on_after(GATHER):
                await self._urgent.wait()
            self._urgent = trio.Event()
            self._wake = trio.Event()
            batch, self._pending = self._pending, []
            target = self._added
            try:
                for session in dict.fromkeys(s for s, _, _, _ in batch):
                    if session not in self._caught_up:
                        first = min(f for s, _, _, f in batch if s == session)
                        cwd = next(c for s, c, _, _ in batch if s == session)
                        await self._catch_up(session, cwd, first)
                await trio.to_thread.run_sync(self._write, [(s, c, e) for s, c, es, _ in batch for e in es])
            except Exception:
                # A transcript must never cost a run: the next daemon catches up from the store.
                log.exception("transcripts not written")
            self._written = target
            self._progress.set()
            self._progress = trio.Event()

    async def _catch_up(self, session: str, cwd: str, before: int) -> None:
        """Write what the file lacks of the events stored before ``before`` (it is new, or
        an earlier daemon did not write them all)."""
        self._caught_up.add(session)
        path = Path(self.path(session))
        _, since, _ = await trio.to_thread.run_sync(self._end, path)
        while since + 1 < before:
            events = [e for e in await self._history(session, since, _PAGE) if e.seq is not None and e.seq < before]
            if not events:
                return
            await trio.to_thread.run_sync(self._write, [(session, cwd, e) for e in events])
            since = events[-1].seq or before

    def _touch(self, path: Path) -> None:
        """Make the session's transcript, and its sub-agents' folder (both shown to its
        runs' sandboxes: what is made in the folder later shows there too)."""
        ensure_private_dir(path.with_suffix("") / "subagents")
        with open(path, "ab", opener=private_opener):
            pass

    def _end(self, path: Path) -> tuple[str | None, int, str]:
        """The last uuid, seq and model a file holds (read from its end the first time)."""
        known = self._ends.get(path)
        if known is not None:
            return known
        end: tuple[str | None, int, str] = (None, 0, "")
        try:
            with open(path, "rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - _TAIL))
                lines = f.read().splitlines()
        except FileNotFoundError:
            lines = []
        for line in reversed(lines):
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and "roostSeq" in entry:
                model = entry.get("message", {}).get("model", "") if isinstance(entry.get("message"), dict) else ""
                end = (entry.get("uuid"), int(entry["roostSeq"]), model or "")
                break
        self._ends[path] = end
        return end

    def _write(self, events: Iterable[tuple[str, str, Event]]) -> None:
        """Append the lines of ``events``, each to its file (a worker thread's work)."""
        out: dict[Path, list[bytes]] = {}
        for session, cwd, event in events:
            if event.type not in _CONVERSATION or event.seq is None:
                continue
            call = _agent_of(event)
            path = Path(self.path(session, call))
            parent, last, model = self._end(path)
            if event.seq <= last:
                continue  # written already (by an earlier daemon)
            if event.type == "run.started":
                model = str(event.data.get("model") or model)
            for i, entry in enumerate(entries(event, cwd, model)):
                line_id = str(uuid.uuid5(_NAMESPACE, f"{session}:{event.seq}:{i}"))
                line = {
                    "parentUuid": parent,
                    "isSidechain": call is not None,
                    "userType": "external",
                    "cwd": cwd,
                    "sessionId": session,
                    "version": roost.__version__,
                    **({"agentId": call} if call is not None else {}),
                    **entry,
                    "uuid": line_id,
                    "timestamp": _timestamp(event.ts),
                    "roostSeq": event.seq,
                }
                out.setdefault(path, []).append(json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
                parent = line_id
            self._ends[path] = (parent, event.seq, model)
        for path, lines in out.items():
            self._append(path, b"".join(lines))

    def _append(self, path: Path, data: bytes) -> None:
        """Append to a file, its folder made private the first time this daemon writes
        there (checking it at every write cost more than the write), and again if it is
        gone (deleted meanwhile)."""
        if path.parent not in self._folders:
            ensure_private_dir(path.parent)
            self._folders.add(path.parent)
        try:
            f = open(path, "ab", opener=private_opener)
        except FileNotFoundError:
            ensure_private_dir(path.parent)
            f = open(path, "ab", opener=private_opener)
        with f:
            f.write(data)


def _remove(paths: Iterable[Path]) -> None:
    """Remove transcripts and their sub-agents' folders (a worker thread's work)."""
    for path in paths:
        path.unlink(missing_ok=True)
        shutil.rmtree(path.with_suffix(""), ignore_errors=True)


def entries(event: Event, cwd: str, model: str = "") -> list[dict[str, Any]]:
    """The transcript entries of one stored event (``type`` and ``message``), none for an
    event that is no part of the conversation."""
    data = event.data
    if event.type == "message.user":
        return [_user(str(data.get("text", "")))]
    if event.type == "compacted":
        return [{**_user(str(data.get("summary", ""))), "isCompactSummary": True}]
    if event.type == "tool.finished":
        block = {
            "tool_use_id": data.get("call_id"),
            "type": "tool_result",
            "content": str(data.get("result", "")),
            "is_error": bool(data.get("is_error")),
        }
        return [_user([block])]
    if event.type == "message.assistant":
        content = [_block(b, cwd) for b in data.get("content", ()) if isinstance(b, Mapping)]
        message = {
            "id": f"msg_{event.run}_{event.seq}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": data.get("stop_reason"),
            "stop_sequence": None,
            "usage": data.get("usage") or {},
        }
        return [{"type": "assistant", "message": message}]
    return []


def _user(content: Any) -> dict[str, Any]:
    return {"type": "user", "message": {"role": "user", "content": content}}


def _block(block: Mapping[str, Any], cwd: str) -> dict[str, Any]:
    """A reply's content block as Claude Code's transcript has it."""
    if block.get("type") == "tool_use":
        name = str(block.get("name", ""))
        input = block.get("input")
        return {
            "type": "tool_use",
            "id": block.get("id"),
            "name": claude.tool_name(name),
            "input": claude.claude_input(name, input, cwd) if isinstance(input, Mapping) else input,
        }
    return dict(block)


def _agent_of(event: Event) -> str | None:
    """The call id of the sub-agent whose event this is (None: the session's own)."""
    path = event.data.get("path")
    return str(path[-1]) if isinstance(path, list) and path else None


def _timestamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
