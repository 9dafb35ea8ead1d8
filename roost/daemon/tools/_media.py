"""Media a tool result or a task carries besides text: :class:`Media` (an image, a PDF,
audio: bytes and what they are), and images made fit to send (:func:`image_media`).

An image is sent as it is when it is small enough (its longest side at most
:data:`MAX_SIDE` pixels, its bytes at most :data:`MAX_IMAGE_BYTES`); otherwise it is
decoded, scaled down to fit and encoded again (PNG when it has transparency, else JPEG).
Decoding is bounded: only PNG, JPEG, GIF and WebP are opened (never the other formats
Pillow knows), at most :data:`MAX_INPUT_BYTES` of file, and an image whose header claims
more than :data:`MAX_PIXELS` pixels is refused before any of it is decoded (a
decompression bomb: a small file that would decode to gigabytes); one image is decoded at
a time in the whole daemon. A truncated or garbled
image is refused, never decoded in part; a PNG's ancillary chunks (a colour profile, text)
with a wrong checksum are dropped, as libpng does.

Blocking (decoding, scaling): run it in a worker thread.
"""

from __future__ import annotations

import io
import threading
import zlib
from dataclasses import dataclass
from typing import Any

#: The longest side an image is sent with (Anthropic's advice: larger ones are scaled
#: down by the API anyway, at the cost of time to the first token).
MAX_SIDE = 1568
#: The bytes an image is sent with at most (Anthropic takes 5 MB an image, base64 grows
#: them by a third).
MAX_IMAGE_BYTES = 3_750_000
#: The bytes of an image file that are read at most.
MAX_INPUT_BYTES = 32 * 1024 * 1024
#: The pixels an image may have to be decoded at all (a 6000x4000 photo has 24 million).
#: Pillow holds a decoded pixel in 4 bytes, and scaling adds a third: a 12 M pixel image
#: costs the daemon about 90 MB with its file's bytes while it is scaled (bench/image_read.py),
#: one at this limit about 160 MB.
MAX_PIXELS = 25_000_000
#: The formats decoded, by Pillow's names, and their media types.
IMAGE_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
#: Media kinds a part can be.
KINDS = ("image", "document", "audio")


class MediaError(Exception):
    """The bytes cannot be sent as media; the message says why, for the model or a person."""


@dataclass(frozen=True, slots=True)
class Media:
    """Bytes a result or task carries besides text: ``kind`` is one of :data:`KINDS`."""

    kind: str
    media_type: str
    data: bytes
    width: int | None = None
    height: int | None = None

    def part(self, digest: str) -> dict[str, Any]:
        """The part the loop and the events carry for it once stored under ``digest``
        (hex): what it is, never its bytes."""
        part: dict[str, Any] = {"type": self.kind, "media_type": self.media_type, "sha256": digest, "bytes": len(self.data)}
        if self.width is not None and self.height is not None:
            part["width"], part["height"] = self.width, self.height
        return part

    def describe(self) -> str:
        """One line for a person or a model: ``image 800x600, 45 KB``, ``audio: audio/wav, 3 KB``."""
        what = f"{self.kind} {self.width}x{self.height}" if self.width is not None else f"{self.kind}: {self.media_type}"
        return f"{what}, {kilobytes(len(self.data))}"


def kilobytes(size: int) -> str:
    """A size as the clients show it: ``45 KB`` (at least 1)."""
    return f"{max(1, round(size / 1024)):,} KB"


def image_media(data: bytes) -> Media:
    """``data`` (a PNG, JPEG, GIF or WebP file) as an image to send: as it is when it fits,
    else scaled down to :data:`MAX_SIDE` and :data:`MAX_IMAGE_BYTES`.

    Raises:
        MediaError: not an image of those formats, too large to decode, truncated or broken.
    """
    from PIL import Image, UnidentifiedImageError

    if len(data) > MAX_INPUT_BYTES:
        raise MediaError(f"the image is {kilobytes(len(data))}, over the {kilobytes(MAX_INPUT_BYTES)} read at most")
    data = _without_bad_ancillary_chunks(data)
    try:
        image = Image.open(io.BytesIO(data), formats=list(IMAGE_TYPES))
    except UnidentifiedImageError:
        raise MediaError("not a PNG, JPEG, GIF or WebP image") from None
    except Image.DecompressionBombError as exc:
        raise MediaError(f"refused: {exc}") from None
    except (OSError, ValueError, SyntaxError) as exc:
        raise MediaError(f"a broken image: {exc}") from None
    with image:
        width, height = image.size
        if width * height > MAX_PIXELS:
            raise MediaError(
                f"refused: the image claims {width}x{height} pixels, over the {MAX_PIXELS:,} decoded at most "
                "(a decompression bomb, or an image too large to send)"
            )
        media_type = IMAGE_TYPES[str(image.format)]
        # One image decoded at a time, all runs together: what images cost the daemon's
        # memory at a peak is one image's, however many are read at once.
        with _DECODING:
            if max(width, height) <= MAX_SIDE and len(data) <= MAX_IMAGE_BYTES:
                try:
                    image.load()  # a truncated or garbled file fails here, not at the provider
                except (OSError, ValueError, SyntaxError) as exc:
                    raise MediaError(f"a broken image: {exc}") from None
                return Media("image", media_type, data, width, height)
            return _scaled(image)


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_DECODING = threading.Lock()


def _without_bad_ancillary_chunks(data: bytes) -> bytes:
    """A PNG without the ancillary chunks whose checksum is wrong, as libpng reads one by
    default (it drops them with a warning; Pillow refuses the whole image, and a provider
    may too). Critical chunks stay as they are: a bad one is still refused. Anything that
    is not a whole PNG comes back unchanged."""
    if not data.startswith(_PNG_SIGNATURE):
        return data
    kept, at, dropped = [_PNG_SIGNATURE], len(_PNG_SIGNATURE), False
    while at + 12 <= len(data):
        length = int.from_bytes(data[at : at + 4], "big")
        end = at + 12 + length
        if end > len(data):
            return data
        kind, body, crc = data[at + 4 : at + 8], data[at + 8 : end - 4], data[end - 4 : end]
        if kind[0] & 0x20 and zlib.crc32(kind + body).to_bytes(4, "big") != crc:
            dropped = True  # ancillary (its name's first letter lower case), and damaged
        else:
            kept.append(data[at:end])
        at = end
    return b"".join(kept) + data[at:] if dropped else data


def _scaled(image: Any) -> Media:
    """``image`` scaled down until it fits, encoded again (resized from the decoded image
    itself, through a cheap reduction first: no whole-size copy of it is made)."""
    from PIL import Image

    side = MAX_SIDE
    try:
        image.draft("RGB", (side, side))  # JPEG: decode at a fraction of the size already
        alpha = image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info)
        mode = "RGBA" if alpha else "RGB"
        frame = image if image.mode == mode else image.convert(mode)
        while True:
            scale = min(1.0, side / max(frame.size))
            size = (max(1, round(frame.width * scale)), max(1, round(frame.height * scale)))
            small = frame.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0) if scale < 1 else frame
            out = io.BytesIO()
            if alpha:
                small.save(out, "PNG", optimize=True)
            else:
                small.save(out, "JPEG", quality=85)
            if out.tell() <= MAX_IMAGE_BYTES or side <= 64:
                return Media("image", "image/png" if alpha else "image/jpeg", out.getvalue(), *small.size)
            side //= 2
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise MediaError(f"a broken image: {exc}") from None
