"""A PDF's text, page by page, for ``read`` (pypdf: pure Python, maintained).

Bounded like a text read: at most :data:`MAX_PDF_BYTES` of file, :data:`MAX_PAGES` pages a
call (``offset`` and ``limit`` count pages), and the characters the output limit shows.
A PDF is untrusted input to a parser: whatever goes wrong reading it (a truncated file,
garbage, an encrypted one) is one clear error, never a crash of the call; pypdf caps what
its streams may inflate to. Blocking: run it in a worker thread (``stop`` is checked
between pages, so a call that timed out stops at the next page).
"""

from __future__ import annotations

import io
import threading
from dataclasses import dataclass, field

from ._media import Media, kilobytes

#: Bytes of a PDF read at most.
MAX_PDF_BYTES = 32 * 1024 * 1024
#: Pages one read returns at most.
MAX_PAGES = 50
#: A PDF attached to a task whole (a document the model reads itself, where the provider
#: takes one): at most these bytes and pages (Anthropic takes 100 pages a document).
MAX_DOCUMENT_BYTES = 10 * 1024 * 1024
MAX_DOCUMENT_PAGES = 100


class PdfError(Exception):
    """The file cannot be read as a PDF; the message says why."""


@dataclass(slots=True)
class PdfExcerpt:
    """What one read of a PDF found: pages ``first`` on, with their text."""

    total: int
    first: int
    pages: list[str] = field(default_factory=list)


def pdf_pages(data: bytes, first: int, limit: int, budget: int, stop: threading.Event) -> PdfExcerpt:
    """The text of pages ``first`` (1-based) to ``first + limit - 1`` of the PDF ``data``
    (at most :data:`MAX_PAGES`), until ``budget`` characters are taken (at least one page).

    Raises:
        PdfError: not a PDF, a broken or encrypted one.
    """
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            raise PdfError("the PDF is encrypted")
        total = len(reader.pages)
        found = PdfExcerpt(total, first)
        chars = 0
        for number in range(first, min(total, first + min(limit, MAX_PAGES) - 1) + 1):
            if stop.is_set() or (found.pages and chars >= budget):
                break
            text = reader.pages[number - 1].extract_text() or ""
            found.pages.append(text)
            chars += len(text)
        return found
    except PdfError:
        raise
    except Exception as exc:  # a hostile file can make the parser fail in any way
        raise PdfError(f"not a readable PDF ({type(exc).__name__}: {exc})") from None


def pdf_document(data: bytes) -> Media:
    """``data`` as a document to send whole, once checked: a readable PDF, not encrypted,
    of at most :data:`MAX_DOCUMENT_BYTES` and :data:`MAX_DOCUMENT_PAGES` pages.

    Raises:
        PdfError: not such a PDF; the message says why.
    """
    from pypdf import PdfReader

    if len(data) > MAX_DOCUMENT_BYTES:
        raise PdfError(f"the PDF is {kilobytes(len(data))}, over the {kilobytes(MAX_DOCUMENT_BYTES)} sent at most")
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        encrypted, pages = reader.is_encrypted, 0 if reader.is_encrypted else len(reader.pages)
    except Exception as exc:  # a hostile file can make the parser fail in any way
        raise PdfError(f"not a readable PDF ({type(exc).__name__}: {exc})") from None
    if encrypted:
        raise PdfError("the PDF is encrypted")
    if not 0 < pages <= MAX_DOCUMENT_PAGES:
        raise PdfError(f"the PDF has {pages} pages; a document sent whole has 1 to {MAX_DOCUMENT_PAGES}")
    return Media("document", "application/pdf", data)
