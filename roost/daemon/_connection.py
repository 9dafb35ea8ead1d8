"""One client connection: a reader that decodes requests, a writer that coalesces output.

Design (see STACK.md, fan-out): whoever produces output hands bytes to the connection with
``send_nowait`` onto a bounded queue; one writer task per connection drains the queue and
writes many messages in one ``send_all``. A full queue means the client is not reading:
it is detached from the session it lags on and told so (``lagged``, with the last seq it was
sent), and the run that produced the events never waits for it.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field
from typing import Any

import trio

from roost.protocol import Notification, encode

log = logging.getLogger(__name__)

#: Messages queued for one client before it counts as lagging.
OUTBOX_SIZE = 8192
#: Live events held for a session while its stored history is being replayed.
REPLAY_BUFFER = 8192

_ids = itertools.count(1)


@dataclass(slots=True)
class Attachment:
    """One session a connection is attached to."""

    #: Highest seq handed to the client; stored events at or below it are not sent again.
    last_seq: int
    #: While the stored history is replayed, live events wait here.
    replaying: bool = True
    buffer: list[tuple[int | None, bytes]] = field(default_factory=list)


class Connection:
    """The daemon's side of one client connection.

    Resource handling:
        :meth:`run_writer` runs for the connection's lifetime; closing the outbox ends it.
    """

    def __init__(self, stream: trio.SocketStream, outbox_size: int = OUTBOX_SIZE) -> None:
        self.id = next(_ids)
        self.stream = stream
        self.client = "unknown"
        self.attachments: dict[str, Attachment] = {}
        self._send, self._receive = trio.open_memory_channel[bytes](outbox_size)
        self._lagged: dict[str, int] = {}
        # Messages queued or being written by the writer; direct writes wait for zero.
        self._queued = 0
        self._write_lock = trio.Lock()
        self.closed = False

    async def run_writer(self) -> None:
        """Write queued messages, many per ``send_all``, until the outbox closes."""
        async with self._receive:
            async for first in self._receive:
                batch = [first]
                while len(batch) < 4096:
                    try:
                        batch.append(self._receive.receive_nowait())
                    except (trio.WouldBlock, trio.EndOfChannel):
                        break
                async with self._write_lock:
                    await self.stream.send_all(b"".join(batch))
                    self._queued -= len(batch)
                    # Told after the backlog that made it lag, so it knows where to resume.
                    lagged, self._lagged = self._lagged, {}
                    for session, last_seq in lagged.items():
                        note = Notification("lagged", [{"session": session, "last_seq": last_seq}])
                        await self.stream.send_all(encode(note))

    async def send(self, data: bytes) -> None:
        """Send a message in order with everything queued before it; never dropped.

        With nothing queued and no write in progress the bytes go straight to the socket:
        a hop through the writer task would cost a scheduler pass on every round trip.
        """
        try:
            if self._queued == 0 and not self._write_lock.locked() and not self.closed:
                self._write_lock.acquire_nowait()
                try:
                    await self.stream.send_all(data)
                finally:
                    self._write_lock.release()
                return
            self._queued += 1
            await self._send.send(data)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    def close_outbox(self) -> None:
        """Let the writer finish what is queued and stop."""
        self.closed = True
        self._send.close()

    def deliver(self, session: str, seq: int | None, data: bytes) -> None:
        """Hand one event of ``session`` to this client without ever waiting."""
        attachment = self.attachments.get(session)
        if attachment is None:
            return
        if attachment.replaying:
            attachment.buffer.append((seq, data))
            if len(attachment.buffer) > REPLAY_BUFFER:
                self.lag(session)
            return
        if seq is not None and seq <= attachment.last_seq:
            return
        try:
            self._send.send_nowait(data)
        except trio.WouldBlock:
            self.lag(session)
            return
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return
        self._queued += 1
        if seq is not None:
            attachment.last_seq = seq

    def deliver_direct(self, data: bytes) -> None:
        """Hand this client a message of its own (a chat's deltas) without waiting.

        Dropped when the client is that far behind: deltas are a live view, and the call's
        response carries the whole reply.
        """
        try:
            self._send.send_nowait(data)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            return
        self._queued += 1

    def lag(self, session: str) -> None:
        """Detach a client that fell behind on ``session``; it is told ``lagged``."""
        attachment = self.attachments.pop(session, None)
        if attachment is not None:
            log.info("connection %d lagged on session %s at seq %d", self.id, session, attachment.last_seq)
            self._lagged[session] = attachment.last_seq

    def describe(self) -> dict[str, Any]:
        """For logs and status."""
        return {"id": self.id, "client": self.client, "attached": sorted(self.attachments)}
