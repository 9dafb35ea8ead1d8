"""The session file: a session as JSON lines, written out and read back.

Format (version 1)::

    {"format": "roost.session", "version": 1, "roost": "0.4.0", "exported": 1712345678.9,
     "session": {"id", "cwd", "created", "events", "status", "parent", "forked_at"}}
    {"seq": 1, "type": "session.created", "ts": ..., "session": ID, "run": null, "cwd": ...}
    {"seq": 2, "type": "run.started", ...}
    ...

The first line is the header; each further line is one stored event, the same map the
store, the wire and ``--json`` carry, seqs 1 to ``events`` in order. A fork is written
whole (what it shares with its parent included), so a file stands on its own; ``parent``
and ``forked_at`` in the header only say where it came from.

Reading one back (:class:`Importer`) checks every line as it arrives and refuses the first
that is wrong, by its number: not UTF-8, not JSON, not a ``roost.session`` header, a newer
version, an unknown or live event type, a seq out of order, another session's event, an
event that does not fit the history before it (the fold of the events so far fails), or a
file that ends before the events its header announces.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Iterable

import roost
from roost.loop import EVENT_TYPES, LIVE_TYPES, Event, SessionState, apply, safe_text

from ._store import SessionRow

FORMAT = "roost.session"
VERSION = 1
#: What one page of an export holds at most: events, and bytes of lines (past that, the
#: page ends, but always after at least one line).
PAGE_EVENTS = 500
PAGE_BYTES = 1 << 20
_SESSION_CREATED = "session.created"


def header_line(row: SessionRow, events: int) -> str:
    """The first line of the file of ``row``'s session, holding its first ``events``."""
    return _line(
        {
            "format": FORMAT,
            "version": VERSION,
            "roost": roost.__version__,
            "exported": time.time(),
            "session": {
                "id": row.id,
                "cwd": row.cwd,
                "created": row.created,
                "events": events,
                "status": row.last_status,
                "parent": row.parent,
                "forked_at": row.forked_at,
            },
        }
    )


def event_line(event: Event) -> str:
    """One stored event as a line: its envelope first, then its own fields."""
    envelope = {"seq": event.seq, "type": event.type, "ts": event.ts, "session": event.session, "run": event.run}
    return _line({**envelope, **event.data})


def page(events: Iterable[Event], upto: int) -> tuple[list[str], int | None]:
    """Lines for ``events`` (those up to seq ``upto``) within :data:`PAGE_BYTES`, and the
    seq to go on after (None: the page reached ``upto``)."""
    lines: list[str] = []
    size = 0
    last = None
    for event in events:
        assert event.seq is not None
        if event.seq > upto or (lines and size >= PAGE_BYTES):
            break
        line = event_line(event)
        lines.append(line)
        size += len(line)
        last = event.seq
    if last is None or last >= upto:
        return lines, None
    return lines, last


def _line(obj: dict[str, Any]) -> str:
    # Python's floats print exactly (repr), so every value reads back equal.
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


class ImportRefused(Exception):
    """A line of the file is wrong: ``line`` is its number (1 is the header)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


@dataclass(frozen=True, slots=True)
class Imported:
    """A file read whole and found sound."""

    #: The header's ``session`` map.
    session: dict[str, Any]
    events: list[Event]
    #: The fold of the events (under the id the file gives).
    state: SessionState


@dataclass(slots=True)
class Importer:
    """Reads a file a part at a time (:meth:`feed`), checking each line as it comes, and
    hands over the whole of it (:meth:`finish`) only if every line was sound."""

    lines: int = 0
    header: dict[str, Any] | None = None
    events: list[Event] = field(default_factory=list)
    state: SessionState | None = None

    def feed(self, lines: Iterable[Any]) -> None:
        """Check and keep the next ``lines`` (str, or UTF-8 bytes; without their newline).

        Raises:
            ImportRefused: the first line that is wrong.
        """
        for raw in lines:
            self.lines += 1
            n = self.lines
            obj = _parse(n, raw)
            if n == 1:
                self._header(obj)
            else:
                self._event(n, obj)

    def finish(self) -> Imported:
        """The file, once every line it announced has come.

        Raises:
            ImportRefused: it is empty, or ends early (the line after its last).
        """
        if self.header is None or self.state is None:
            raise ImportRefused(1, "the file is empty: it is not a roost session export")
        expected = self.header["events"]
        if len(self.events) < expected:
            raise ImportRefused(
                self.lines + 1,
                f"the file ends after {len(self.events)} events, but its header announces {expected} "
                "(is it cut short?)",
            )
        return Imported(self.header, self.events, self.state)

    def _header(self, obj: dict[str, Any]) -> None:
        if obj.get("format") != FORMAT:
            raise ImportRefused(1, f"not a roost session export (the first line must be a {FORMAT!r} header)")
        version = obj.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise ImportRefused(1, f"the header's version must be a whole number, not {version!r}")
        if version > VERSION:
            raise ImportRefused(
                1,
                f"format version {version} (made by roost {obj.get('roost')}) is newer than this roost "
                f"({roost.__version__}) reads: {VERSION}",
            )
        session = obj.get("session")
        if not isinstance(session, dict):
            raise ImportRefused(1, "the header has no session map")
        for key, kind in (("id", str), ("cwd", str), ("created", (int, float)), ("events", int)):
            value = session.get(key)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ImportRefused(1, f"the header's session.{key} is missing or not a {_kind(kind)}")
        if not session["id"] or session["events"] < 1:
            raise ImportRefused(1, "the header's session needs an id and at least one event")
        self.header = session
        self.state = SessionState(session["id"])

    def _event(self, n: int, obj: dict[str, Any]) -> None:
        assert self.header is not None and self.state is not None
        expected = self.header["events"]
        if len(self.events) >= expected:
            raise ImportRefused(n, f"one line more than the {expected} events the header announces")
        kind = obj.get("type")
        if obj.get("seq") != n - 1 or isinstance(obj.get("seq"), bool):
            raise ImportRefused(n, f"seq {obj.get('seq')!r} where {n - 1} was expected")
        if kind not in EVENT_TYPES or kind in LIVE_TYPES:
            raise ImportRefused(n, f"{kind!r} is not a type of stored event")
        if n == 2 and kind != _SESSION_CREATED:
            raise ImportRefused(n, f"the first event must be {_SESSION_CREATED}, not {kind}")
        if obj.get("session") != self.header["id"]:
            raise ImportRefused(n, f"an event of session {obj.get('session')!r}, in the file of {self.header['id']!r}")
        ts = obj.get("ts")
        if not isinstance(ts, (int, float)) or isinstance(ts, bool):
            raise ImportRefused(n, "ts must be a number")
        if not isinstance(obj.get("run"), (str, type(None))):
            raise ImportRefused(n, "run must be a string or null")
        if safe_text(obj) != obj:
            raise ImportRefused(n, "text that is not valid Unicode (a lone surrogate)")
        if kind == "permission.resolved" and "rules" in obj:
            # A file brings history, never grants: an approval "for the session" in it
            # allows nothing here (a made-up file could carry bash(*)); kept as a record.
            obj = {k: v for k, v in obj.items() if k != "rules"} | {"rules_not_granted": obj["rules"]}
        event = Event.from_map(obj)
        try:
            self.state = apply(self.state, event)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise ImportRefused(n, f"a {kind} event that does not fit the history before it ({exc!r})") from None
        self.events.append(event)


def _parse(n: int, raw: Any) -> dict[str, Any]:
    if isinstance(raw, (bytes, bytearray)):
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ImportRefused(n, f"not UTF-8 text (byte {exc.start + 1})") from None
    if not isinstance(raw, str):
        raise ImportRefused(n, "not a line of text")
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        msg = getattr(exc, "msg", str(exc)).removesuffix(" at")
        col = getattr(exc, "colno", None)
        raise ImportRefused(n, f"not JSON ({msg}{f' at column {col}' if col else ''})") from None
    if not isinstance(obj, dict):
        raise ImportRefused(n, "not a JSON object")
    return obj


def _kind(kind: Any) -> str:
    return {str: "string", int: "whole number"}.get(kind, "number")
