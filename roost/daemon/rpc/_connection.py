"""One client connection: a reader that decodes requests, a writer that coalesces output.

Design (awaiting a channel send per event per client measured 20 times slower than this):
whoever produces output hands bytes to the connection
without waiting (:meth:`Connection.queue`); one writer task per connection drains the
outbox and writes many messages in one ``send_all``. The outbox holds at most ``outbox_size``
queued messages: past that :meth:`~Connection.queue` refuses, which means the client is not
reading (``_fanout`` then detaches it from that session). Notes about lagging
(:meth:`~Connection.queue_note`) are queued past the limit, so that a client is always told;
there is at most one per session it lagged on, so memory stays bounded.

Whatever is handed over with nothing queued before it (a response, an event for a follower
that keeps up) is written straight into the socket's buffer, and only what does not fit is
queued: a hop through the writer task costs scheduler passes on every message, and under
load (bench/scale.py: a thousand followers) every pass makes every run wait longer.
Requests are read with trio's ``receive_some``: reading the socket directly as well measured
no faster round trip (bench/rpc_roundtrip.py: 91.7 and 94.3 µs, both ~0.9x a minimal trio
server, within the noise).
"""

from __future__ import annotations

import itertools
import math
import os

import trio

#: Messages queued for one client before it counts as lagging.
OUTBOX_SIZE = 8192

_ids = itertools.count(1)


class Connection:
    """The daemon's side of one client connection.

    Resource handling:
        :meth:`run_writer` runs for the connection's lifetime; closing the outbox ends it.
    """

    def __init__(self, stream: trio.SocketStream, outbox_size: int | None = None) -> None:
        self.id = next(_ids)
        self.stream = stream
        self.client = "unknown"
        self._limit = OUTBOX_SIZE if outbox_size is None else outbox_size
        # Unbounded as a channel: the bound is ``_limit``, counted in ``_queued``, which
        # notes may exceed.
        self._send, self._receive = trio.open_memory_channel[bytes](math.inf)
        # Messages queued or being written by the writer; direct writes wait for zero.
        self._queued = 0
        self._write_lock = trio.Lock()
        # Responses wait here for room: a client that sends but never reads is slowed down.
        self._room = trio.lowlevel.ParkingLot()
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
                self._room.unpark_all()

    async def send(self, data: bytes) -> None:
        """Send a message in order with everything queued before it; never dropped (it
        waits while the outbox is full). What does not fit in the socket's buffer at once is
        waited for: a long replay goes out a chunk at a time, at the client's pace."""
        while self._queued >= self._limit and not self.closed:
            await self._room.park()
        try:
            if not self._idle():
                self._put(data)
                return
            sent = self._write_now(data)
            if sent < len(data):
                async with self._write_lock:  # the rest, before anything queued after it
                    await self.stream.send_all(memoryview(data)[sent:])
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    def queue(self, data: bytes) -> bool:
        """Hand over a message without waiting; False (nothing queued) when the client
        already has ``outbox_size`` messages waiting, or the connection is closing."""
        if self._queued >= self._limit:
            return False
        sent = self._write_now(data) if self._idle() else 0
        return sent == len(data) or self._put(data[sent:] if sent else data)

    def queue_note(self, data: bytes) -> None:
        """Queue a note the client must get (that it lagged), even over the limit."""
        self._put(data)

    def close_outbox(self) -> None:
        """Let the writer finish what is queued and stop."""
        self.closed = True
        self._send.close()
        self._room.unpark_all()

    def _idle(self) -> bool:
        """Nothing is queued or being written: a message may go straight to the socket."""
        return self._queued == 0 and not self._write_lock.locked() and not self.closed

    def _write_now(self, data: bytes) -> int:
        """How much of ``data`` went straight into the socket's buffer (nothing runs
        meanwhile, so nothing can come between): none when it is full, or when the stream
        is not a socket (as in tests). A socket that fails is the writer's to report: what
        is left meets the same error there."""
        sock = getattr(self.stream, "socket", None)
        fd = sock.fileno() if sock is not None else -1
        if fd < 0:
            return 0
        try:
            return os.write(fd, data)
        except OSError:
            return 0

    def _put(self, data: bytes) -> bool:
        try:
            self._send.send_nowait(data)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return False
        self._queued += 1
        return True
