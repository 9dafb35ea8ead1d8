"""``read`` on an image or a PDF (by its name's extension): an image part the model sees
(scaled down when large: ``_media``), or a PDF's text page by page (``_pdf``).

The file is the one ``read`` located and judged (the same path rules as a text read: the
caller decided it first), opened the same way (regular, no link followed), and read up to
a cap, so that a huge file is refused, never loaded.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, Mapping

import trio

from ..folder._files import FileRefused, open_regular
from ._base import ToolContext, ToolResult, truncate
from ._fs import open_path
from ._media import MAX_INPUT_BYTES, MediaError, image_media, kilobytes
from ._pdf import MAX_PDF_BYTES, PdfError, PdfExcerpt, pdf_pages

#: Extensions read as images, and as PDFs.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
PDF_SUFFIXES = (".pdf",)


def is_media(path: Path) -> bool:
    """Whether ``read`` treats ``path`` as an image or a PDF."""
    return path.suffix.lower() in IMAGE_SUFFIXES + PDF_SUFFIXES


async def read_media(name: str, path: Path, inside: bool, input: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
    """``read`` of the image or PDF at the real path ``path`` (``name`` as the call gave it)."""
    pdf = path.suffix.lower() in PDF_SUFFIXES
    cap = MAX_PDF_BYTES if pdf else MAX_INPUT_BYTES
    stop = threading.Event()
    try:
        with trio.move_on_after(ctx.timeout) as scope:
            try:
                data = await ctx.in_thread(_read_capped, path, cap, abandon_on_cancel=True)
                if pdf:
                    offset, limit = input.get("offset", 1), input.get("limit", 20)
                    pages = await ctx.in_thread(pdf_pages, data, offset, limit, ctx.output_limit, stop, abandon_on_cancel=True)
                else:
                    media = await ctx.in_thread(image_media, data, abandon_on_cancel=True)
            finally:
                stop.set()
    except OSError as exc:
        return read_failure(name, exc)
    except (MediaError, PdfError) as exc:
        return ToolResult(f"cannot read {name}: {exc}", is_error=True)
    if scope.cancelled_caught:
        return ToolResult(f"read timed out after {ctx.timeout:g} s", is_error=True)
    meta: dict[str, Any] = {"bytes": len(data), "outside": not inside}
    if pdf:
        return ToolResult(_pdf_text(pages, input.get("offset", 1), ctx.output_limit), meta={**meta, "pages": pages.total})
    # Scaled down (or a damaged chunk dropped): what is sent is not the file's bytes.
    changed = "" if media.data is data else f", {kilobytes(len(data))} on disk"
    text = f"{name}: {media.describe()} ({media.media_type}{changed})"
    return ToolResult(text, meta={**meta, "image": {"width": media.width, "height": media.height}}, parts=(media,))


def read_failure(name: str, exc: OSError) -> ToolResult:
    """The error result of a read of ``name`` (as the call gave it) that failed with ``exc``."""
    if isinstance(exc, FileNotFoundError):
        return ToolResult(f"no such file: {name}", is_error=True)
    if isinstance(exc, IsADirectoryError):
        return ToolResult(f"{name} is a directory, not a file", is_error=True)
    if isinstance(exc, FileRefused):
        return ToolResult(f"cannot read {name}: {exc.strerror}", is_error=True)
    return ToolResult(f"cannot read {name}: {exc.strerror or exc}", is_error=True)


def _read_capped(path: Path, cap: int) -> bytes:
    """The bytes of the regular file at ``path`` (blocking), if there are at most ``cap``."""
    fd = open_regular(path, opener=open_path)
    with open(fd, "rb") as file:
        size = os.fstat(fd).st_size
        if size > cap:
            raise OSError(f"the file is {kilobytes(size)}, over the {kilobytes(cap)} read at most")
        data = file.read(cap + 1)
    if len(data) > cap:  # it grew since
        raise OSError(f"the file is over the {kilobytes(cap)} read at most")
    return data


def _pdf_text(found: PdfExcerpt, offset: int, output_limit: int) -> str:
    if found.total == 0:
        return "[a PDF without pages]"
    if not found.pages:
        return f"[the PDF has {found.total} pages; offset {offset} is past the end]"
    text = "\n\n".join(f"--- page {n} ---\n{page}" for n, page in enumerate(found.pages, start=found.first))
    text = truncate(text, output_limit)
    after = found.first + len(found.pages)
    if after <= found.total:
        text += f"\n[{found.total} pages; read on with offset {after}]"
    return text
