"""Fan-out: every event of a session goes to every connection attached to it, in order."""

from __future__ import annotations

from typing import Any

from roost.protocol import Notification, encode

from ._connection import Connection


class Hub:
    """Who is attached to which session."""

    def __init__(self) -> None:
        self._subscribers: dict[str, set[Connection]] = {}

    def subscribe(self, session: str, connection: Connection) -> None:
        """Send ``session``'s events to ``connection`` from now on."""
        self._subscribers.setdefault(session, set()).add(connection)

    def unsubscribe(self, session: str, connection: Connection) -> None:
        """Stop sending ``session``'s events to ``connection``."""
        subscribers = self._subscribers.get(session)
        if subscribers is not None:
            subscribers.discard(connection)
            if not subscribers:
                del self._subscribers[session]

    def drop(self, connection: Connection) -> None:
        """Forget a closed connection everywhere."""
        for session in list(connection.attachments):
            self.unsubscribe(session, connection)

    def count(self, session: str) -> int:
        """How many connections are attached to ``session``."""
        return len(self._subscribers.get(session, ()))

    def publish(self, event: dict[str, Any]) -> None:
        """Deliver one event map (encoded once) to everyone attached to its session."""
        session = event["session"]
        subscribers = self._subscribers.get(session)
        if not subscribers:
            return
        data = encode(Notification("event", [event]))
        seq = event.get("seq")
        for connection in list(subscribers):
            connection.deliver(session, seq, data)
            if session not in connection.attachments:
                self.unsubscribe(session, connection)
