"""Sans-IO decoding of a msgpack byte stream into messages.

msgpack-RPC has no length prefix: messages are msgpack objects back to back. The decoder
buffers at most ``max_frame`` bytes of one unfinished message; more than that and the stream
is refused with :class:`FrameTooLarge`. Bytes that are not msgpack raise
:class:`ProtocolError`. Both are fatal to the connection (the stream cannot be resynchronised);
a decodable object that is not a valid message is not fatal and comes back as a
:class:`ProtocolError` in the output, so the caller can answer it and go on.
"""

from __future__ import annotations

from typing import Union

import msgpack

from ._errors import FrameTooLarge, ProtocolError
from ._messages import Message, parse

#: Default maximum size of one message: 16 MiB.
DEFAULT_MAX_FRAME = 16 * 1024 * 1024
#: The bytes of the images one dispatch carries at most, all together (``dispatch``'s
#: ``images``): a frame keeps room for the rest of the request.
DISPATCH_IMAGE_BYTES = 12 * 1024 * 1024


class Decoder:
    """Feed bytes in, get messages out. No IO.

    Error handling:
        :meth:`feed` raises :class:`FrameTooLarge` or :class:`ProtocolError` when the stream
        is broken; after that the decoder must not be used again. A well-formed msgpack
        object that is not a message is returned as a :class:`ProtocolError` instance in
        the list, and decoding continues.
    """

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        # Only while part of a message is waiting for the rest: an unpacker holds ~40 KiB
        # (its parse stack), which a thousand idle connections would keep for nothing.
        self._unpacker: msgpack.Unpacker | None = None
        # Stream offset at which the unpacker started.
        self._base = 0
        self._fed = 0
        # Stream offset where the unfinished message starts (the end of the last whole one).
        self._message_start = 0

    def feed(self, data: bytes | bytearray) -> list[Union[Message, ProtocolError]]:
        """Add bytes from the stream; return the messages now complete, in order."""
        out: list[Union[Message, ProtocolError]] = []
        if self._unpacker is None and len(data) <= self.max_frame:
            # The usual case: one whole message per read, decoded without an unpacker.
            try:
                obj = msgpack.unpackb(data, raw=False, strict_map_key=False)
            except Exception:
                pass  # several messages, part of one, or bad bytes: the unpacker says which
            else:
                self._fed += len(data)
                self._message_start = self._fed
                try:
                    out.append(parse(obj))
                except ProtocolError as exc:
                    out.append(exc)
                return out
        if len(data) <= self.max_frame - self._buffered():
            # It all fits, fed at once.
            try:
                self._unpacker_now().feed(data)
            except msgpack.BufferFull as exc:
                raise FrameTooLarge(f"a message exceeds the {self.max_frame}-byte frame limit") from exc
            self._fed += len(data)
            self._drain(out)
            return out
        view = memoryview(data)
        # Feed in slices no larger than the free buffer so that a burst of many small
        # messages in one read is never mistaken for one oversized message.
        while view:
            room = self.max_frame - self._buffered()
            if room <= 0:
                raise FrameTooLarge(f"a message exceeds the {self.max_frame}-byte frame limit")
            chunk, view = view[:room], view[room:]
            try:
                self._unpacker_now().feed(chunk)
                self._fed += len(chunk)
            except msgpack.BufferFull as exc:
                raise FrameTooLarge(
                    f"a message exceeds the {self.max_frame}-byte frame limit"
                ) from exc
            self._drain(out)
        return out

    def _unpacker_now(self) -> msgpack.Unpacker:
        if self._unpacker is None:
            self._unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=self.max_frame)
            self._base = self._fed
        return self._unpacker

    def _buffered(self) -> int:
        # Bytes of the unfinished message fed so far. Not ``fed - tell()``: the unpacker
        # parses a message incrementally and ``tell()`` moves past the parts it has already
        # turned into objects, so a message of many small items would never hit the limit.
        return self._fed - self._message_start

    def _drain(self, out: list[Union[Message, ProtocolError]]) -> None:
        unpacker = self._unpacker
        assert unpacker is not None
        while True:
            try:
                obj = next(unpacker)
            except StopIteration:
                break
            except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError) as exc:
                raise ProtocolError(f"bytes are not msgpack: {exc}") from exc
            except TypeError as exc:
                # A map key Python cannot hash (an array or a map as a key).
                raise ProtocolError(f"unsupported msgpack: {exc}") from exc
            self._message_start = self._base + unpacker.tell()
            self._append(out, obj)
        if self._message_start == self._fed:
            self._unpacker = None  # nothing waits for more bytes

    @staticmethod
    def _append(out: list[Union[Message, ProtocolError]], obj: object) -> None:
        try:
            out.append(parse(obj))
        except ProtocolError as exc:
            out.append(exc)
