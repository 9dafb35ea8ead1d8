"""Media between the loop and the store: bytes stored once and carried as parts that name
them (:func:`stored_parts`), and the parts of a model call's messages filled with their
bytes just before it is sent (:class:`MediaFill`).

The loop, its events and the clients only ever see a part's description
(``{"type": "image", "media_type", "sha256", "bytes", "width", "height"}``); a provider
gets the same map with ``data`` (base64) added. A part whose bytes are no longer stored
(the database changed by hand, a session imported without them) is sent as a note.
"""

from __future__ import annotations

import base64
from typing import Any, Mapping, Sequence

from ..storage._store import EventStore
from ..tools._media import KINDS, Media


async def stored_parts(store: EventStore, session: str, media: Sequence[Media]) -> tuple[dict[str, Any], ...]:
    """Store each of ``media`` for ``session`` (once by content); the parts naming them."""
    return tuple([m.part(await store.put_media(session, m.data)) for m in media])


class MediaFill:
    """Fills a model call's messages with their media parts' bytes (``data``, base64);
    messages without media are the same objects.

    A call sends the whole history, most of it the previous call's messages unchanged: the
    messages found to hold no media are remembered (by identity, with a reference, so an id
    is never taken for another object's), and only the new ones are looked through. Without
    that, a long run looked through its whole history at every call (30% of the daemon's
    CPU over 300 steps).
    """

    #: Messages remembered at most (then forgotten all at once).
    REMEMBERED = 16_384

    def __init__(self, store: EventStore) -> None:
        self._store = store
        self._plain: dict[int, Mapping[str, Any]] = {}

    async def __call__(self, messages: Sequence[Mapping[str, Any]]) -> tuple[Mapping[str, Any], ...]:
        cache: dict[str, str | None] = {}
        out = []
        for message in messages:
            if self._plain.get(id(message)) is message:
                out.append(message)
                continue
            content = message.get("content")
            if isinstance(content, (list, tuple)) and any(_has_media(b) for b in content):
                message = {**message, "content": [await self._fill(b, cache) for b in content]}
            else:
                if len(self._plain) >= self.REMEMBERED:
                    self._plain.clear()
                self._plain[id(message)] = message
            out.append(message)
        return tuple(out)

    async def _fill(self, block: Mapping[str, Any], cache: dict[str, str | None]) -> Mapping[str, Any]:
        if block.get("type") == "tool_result" and isinstance(block.get("content"), (list, tuple)):
            return {**block, "content": [await self._fill(b, cache) for b in block["content"]]}
        if block.get("type") not in KINDS or "sha256" not in block or "data" in block:
            return block
        digest = str(block["sha256"])
        if digest not in cache:
            data = await self._store.media(digest)
            cache[digest] = base64.b64encode(data).decode("ascii") if data is not None else None
        if cache[digest] is None:
            return {"type": "text", "text": f"[{block['type']} {block.get('media_type', '')}: no longer stored]"}
        return {**block, "data": cache[digest]}


def _has_media(block: Mapping[str, Any]) -> bool:
    if block.get("type") in KINDS:
        return True
    content = block.get("content")
    return block.get("type") == "tool_result" and isinstance(content, (list, tuple)) and any(b.get("type") in KINDS for b in content)
