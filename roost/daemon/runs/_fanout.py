"""Fan-out: every event of a session reaches every connection attached to it, in order, with
no gap and no duplicate; a connection that falls behind is told so, however often.

This module alone owns attachments: who is attached to which session, the replay of stored
events on ``attach``, and lagging. The rules:

- ``attach(since)`` subscribes first, then replays the stored events after ``since``; live
  events that arrive meanwhile wait in the attachment's buffer, and once the replay is done
  they go out minus the seqs it already sent. So the client sees every seq once, in order.
  The replay sends the events as the store keeps them (msgpack, never decoded here), many
  per write: a long history costs little more than its bytes.
- ``publish`` encodes an event once and queues it for each attachment without waiting (a
  slow client never slows a run).
- An attachment lags when its connection's outbox is full, or when its replay buffer
  overflows. It is then detached, and a ``lagged`` notification (session, the last seq it
  was sent) is queued on the connection after what is already queued: the client re-attaches
  with ``since``. This holds every time, including while a client is re-attaching.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence

from roost.protocol import Notification, encode, notification_head

from ..rpc._connection import Connection

log = logging.getLogger(__name__)

#: Live events held for an attachment while its stored history is being replayed.
REPLAY_BUFFER = 8192

#: Bytes of replayed events handed to a connection at once.
REPLAY_CHUNK = 256 << 10

#: Reads a session's stored events after a seq: (seq, the event map as msgpack), in order.
StoredEvents = Callable[[str, int], Awaitable[Sequence[tuple[int, bytes]]]]

#: What an event notification starts with; the event map follows.
_EVENT_HEAD = notification_head("event", 1)


@dataclass(slots=True)
class _Attachment:
    """One connection attached to one session."""

    #: Highest seq handed to the client; stored events at or below it are not sent again.
    last_seq: int
    #: While the stored history is replayed, live events wait here.
    replaying: bool = True
    buffer: list[tuple[int | None, bytes]] = field(default_factory=list)


class Fanout:
    """Who is attached to which session, and delivery to them."""

    def __init__(self, stored: StoredEvents, replay_buffer: int | None = None) -> None:
        self._stored = stored
        self._replay_buffer = REPLAY_BUFFER if replay_buffer is None else replay_buffer
        self._sessions: dict[str, dict[Connection, _Attachment]] = {}

    async def attach(self, connection: Connection, session: str, since: int) -> int:
        """Send ``session``'s stored events after ``since``, then its live ones; the last
        seq the replay sent (``since`` when there was nothing, or when it lagged at once).

        Attaching again replaces the connection's earlier attachment to the session.
        """
        attachment = _Attachment(last_seq=since)
        self._sessions.setdefault(session, {})[connection] = attachment
        stored = await self._stored(session, since)
        start = 0
        while start < len(stored):
            chunk: list[bytes] = []
            size, end = 0, start
            while end < len(stored) and size < REPLAY_CHUNK:
                chunk += (_EVENT_HEAD, stored[end][1])
                size += len(stored[end][1])
                end += 1
            if not self._holds(connection, session, attachment):
                return attachment.last_seq
            await connection.send(b"".join(chunk))
            attachment.last_seq = stored[end - 1][0]
            start = end
        if self._holds(connection, session, attachment):
            attachment.replaying = False
            buffered, attachment.buffer = attachment.buffer, []
            for seq, data in buffered:
                self._deliver(connection, session, attachment, seq, data)
        return attachment.last_seq

    def detach(self, connection: Connection, session: str) -> None:
        """Stop sending ``session``'s events to ``connection``."""
        attached = self._sessions.get(session)
        if attached is not None:
            attached.pop(connection, None)
            if not attached:
                del self._sessions[session]

    def drop(self, connection: Connection) -> None:
        """Forget a closed connection everywhere."""
        for session in [s for s, attached in self._sessions.items() if connection in attached]:
            self.detach(connection, session)

    def count(self, session: str) -> int:
        """How many connections are attached to ``session``."""
        return len(self._sessions.get(session, ()))

    def publish(self, event: dict[str, Any]) -> None:
        """Queue one event map (encoded once) for everyone attached to its session."""
        session = event["session"]
        attached = self._sessions.get(session)
        if not attached:
            return
        data = encode(Notification("event", [event]))
        seq = event.get("seq")
        for connection, attachment in list(attached.items()):
            self._deliver(connection, session, attachment, seq, data)

    def _deliver(
        self, connection: Connection, session: str, attachment: _Attachment, seq: int | None, data: bytes
    ) -> None:
        if attachment.replaying:
            attachment.buffer.append((seq, data))
            if len(attachment.buffer) > self._replay_buffer:
                self._lag(connection, session, attachment)
            return
        if seq is not None and seq <= attachment.last_seq:
            return
        if not connection.queue(data):
            self._lag(connection, session, attachment)
            return
        if seq is not None:
            attachment.last_seq = seq

    def _lag(self, connection: Connection, session: str, attachment: _Attachment) -> None:
        log.info("connection %d lagged on session %s at seq %d", connection.id, session, attachment.last_seq)
        self.detach(connection, session)
        note = Notification("lagged", [{"session": session, "last_seq": attachment.last_seq}])
        connection.queue_note(encode(note))

    def _holds(self, connection: Connection, session: str, attachment: _Attachment) -> bool:
        """Whether ``attachment`` is still the connection's attachment to ``session``."""
        return self._sessions.get(session, {}).get(connection) is attachment
