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
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import trio

from ..storage._store import EventStore
from ..tools._media import KINDS, Media


async def stored_parts(store: EventStore, session: str, media: Sequence[Media]) -> tuple[dict[str, Any], ...]:
    """Store each of ``media`` for ``session`` (once by content); the parts naming them."""
    return tuple([m.part(await store.put_media(session, m.data)) for m in media])


@dataclass(eq=False)
class MediaMemo:
    """What a track's previous model call sent (see :class:`MediaFill`): its messages, and
    the indexes of those that hold media."""

    messages: tuple[Mapping[str, Any], ...] = ()
    media: tuple[int, ...] = ()


class MediaFill:
    """Fills a model call's messages with their media parts' bytes (``data``, base64);
    messages without media are the same objects.

    A call sends the whole history, most of it the previous call's messages unchanged: when
    a call's messages begin with those its track sent last (its :class:`MediaMemo`;
    compared by identity first, in C), only the messages after those are looked through.
    Without that, a long run looked through its whole history at every call (30% of the
    daemon's CPU over 300 steps). The bytes are not kept between calls: they are read from
    the store again for each.
    """

    def __init__(self, store: EventStore) -> None:
        self._store = store

    async def __call__(
        self, messages: Sequence[Mapping[str, Any]], memo: MediaMemo | None = None, stored: trio.Event | None = None
    ) -> tuple[Mapping[str, Any], ...]:
        """``messages`` with their media's bytes; a call started before its step's events
        were stored (see ``_model_calls.CallAhead``) waits for ``stored`` first when they
        hold media, the newest of which may be in those events."""
        messages = tuple(messages)
        known = len(memo.messages) if memo is not None else 0
        if memo is not None and known and messages[:known] == memo.messages:
            media = [*memo.media, *(i for i in range(known, len(messages)) if _holds_media(messages[i]))]
        else:
            media = [i for i, message in enumerate(messages) if _holds_media(message)]
        if memo is not None:
            memo.messages, memo.media = messages, tuple(media)
        if not media:
            return messages
        if stored is not None:
            await stored.wait()
        cache: dict[str, str | None] = {}
        out = list(messages)
        for i in media:
            out[i] = {**out[i], "content": [await self._fill(b, cache) for b in out[i]["content"]]}
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


def _holds_media(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, (list, tuple)) and any(_has_media(b) for b in content)


def _has_media(block: Mapping[str, Any]) -> bool:
    if block.get("type") in KINDS:
        return True
    content = block.get("content")
    return block.get("type") == "tool_result" and isinstance(content, (list, tuple)) and any(b.get("type") in KINDS for b in content)
