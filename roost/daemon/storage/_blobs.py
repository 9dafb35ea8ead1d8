"""Large texts of events, stored once by content: how an event's stored body refers to them.

Every string value in an event's data of at least :data:`BLOB_MIN` bytes (UTF-8) is kept
apart, under the SHA-256 of its bytes, and the body holds a msgpack extension value in its
place (code :data:`REF`, the 32-byte digest), which no value of an event can be mistaken
for. In practice that is a tool's output (``tool.finished``'s ``result``), the text a write
or edit call carries (the same string in ``message.assistant``'s ``tool_use``, in
``permission.requested`` and in ``tool.started``: stored once), a long task, summary or
final answer. The same text anywhere in the database is stored once. Readers get bodies
with the texts put back (:func:`unpack_body`), so nothing outside the store sees a
reference.

Media (an image, a PDF: bytes, not text) are blobs too, but never inlined in an event: a
part names them by digest (``{"type": "image", "sha256": HEX, ...}``) and the session
refers to them (``_writer.store_media``); the daemon reads them back
(``EventStore.media``) only to send them to a model.

This module is pure (no SQL, no IO): the store's writer (``_writer.py``) keeps the texts
in its ``blobs`` table, zlib-compressed when that makes them smaller (:func:`compress`), and
its reads (``_reads.py``) put them back.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass
from typing import Any, Mapping

import msgpack

from roost.protocol import pack

#: Bytes (UTF-8) from which a string of an event is stored apart, once. Below a SQLite page
#: (4 KiB): bodies stay small rows, and an output read twice is not stored twice.
BLOB_MIN = 2048
#: The msgpack extension code of a reference: its data is the text's SHA-256.
REF = 1


@dataclass(frozen=True, slots=True)
class Blob:
    """A text stored apart: its SHA-256 and its UTF-8 bytes."""

    digest: bytes
    data: bytes


def pack_body(event_map: Mapping[str, Any]) -> tuple[bytes, tuple[Blob, ...]]:
    """An event map's stored body, and the texts it refers to instead of holding them."""
    body = pack(event_map)
    if len(body) < BLOB_MIN:
        return body, ()  # no string in it can be that long
    found: dict[bytes, Blob] = {}
    swapped = _swap(event_map, found)
    if not found:
        return body, ()
    return pack(swapped), tuple(found.values())


def unpack_body(body: bytes, texts: Mapping[bytes, str] | None = None) -> Any:
    """A stored body as the event map, with its references replaced by ``texts``.

    Without ``texts``, references stay as :class:`msgpack.ExtType` values (enough for
    readers of small fields, such as a run's ``reason``).

    Raises:
        MissingBlob: a referenced text is not in ``texts``.
    """
    if texts is None:
        return msgpack.unpackb(body, raw=False, strict_map_key=False)

    def ext_hook(code: int, data: bytes) -> Any:
        if code != REF:
            return msgpack.ExtType(code, data)
        try:
            return texts[data]
        except KeyError:
            raise MissingBlob(data) from None

    return msgpack.unpackb(body, raw=False, strict_map_key=False, ext_hook=ext_hook)


class MissingBlob(LookupError):
    """A body refers to a text that is not stored (the database was changed by hand)."""

    def __init__(self, digest: bytes) -> None:
        super().__init__(f"the stored text {digest.hex()} is missing")
        self.digest = digest


def compress(data: bytes) -> tuple[bytes, bool]:
    """What the blobs table stores for ``data``, and whether that is zlib-compressed (only
    when it is smaller). Level 1: the writer thread does it, and every commit waits on it."""
    packed = zlib.compress(data, 1)
    return (packed, True) if len(packed) < len(data) else (data, False)


def decompress(data: bytes, compressed: bool) -> str:
    """The text a blobs row holds."""
    return (zlib.decompress(data) if compressed else data).decode("utf-8")


def media_blob(data: bytes) -> Blob:
    """Media bytes (an image, a PDF) as a blob: stored like a text, by the SHA-256 of its
    bytes, and named in an event's part by that digest in hex (never inlined)."""
    return Blob(hashlib.sha256(data).digest(), data)


def _swap(value: Any, found: dict[bytes, Blob]) -> Any:
    """``value`` with each long string replaced by a reference, noted in ``found``."""
    if isinstance(value, str):
        # A character is at most 4 bytes: shorter strings cannot reach BLOB_MIN.
        if len(value) * 4 < BLOB_MIN:
            return value
        data = value.encode("utf-8")
        if len(data) < BLOB_MIN:
            return value
        digest = hashlib.sha256(data).digest()
        found.setdefault(digest, Blob(digest, data))
        return msgpack.ExtType(REF, digest)
    if isinstance(value, Mapping):
        return {k: _swap(v, found) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_swap(v, found) for v in value]
    return value
