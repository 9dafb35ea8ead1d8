"""A text file's lines as they are read: never the whole file, never all of a huge line.

``read`` and ``grep`` both count lines here, so a line number one of them shows is the line
the other finds. Lines are what :meth:`str.splitlines` makes of the decoded text (``\\n``,
``\\r\\n``, ``\\r`` and the other Unicode line breaks end a line; bytes that are not UTF-8
become U+FFFD). The file is decoded and split a block at a time, so at most a block and
:data:`LINE_LIMIT` characters of one line are held: a longer line is cut there, and the
rest of it is read through (only if the caller asks for the next line) without being kept.
"""

from __future__ import annotations

import codecs
import threading
from itertools import repeat
from typing import BinaryIO, Iterator

#: Characters of one line kept; the rest of a longer line is skipped.
LINE_LIMIT = 64 * 1024
#: Bytes read at a time: text is decoded and split a block at a time, about as fast as
#: decoding a whole file at once.
_BLOCK = 1 << 20
#: What ends a line for str.splitlines (``\r\n`` ends one too, as one break).
_BREAKS = frozenset("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


def text_lines(
    file: BinaryIO, limit: int = LINE_LIMIT, *, stop: threading.Event | None = None
) -> Iterator[tuple[str, bool]]:
    """The lines of ``file`` (opened in binary mode, read from where it is), one at a time,
    each as ``(text, cut)``: the line without its break, and whether it went on past
    ``limit`` characters (only its start is in ``text``).

    Memory stays within a block (1 MiB) and ``limit`` characters, whatever the file holds.
    The rest of a line longer than that is read through when the next line is asked for,
    not before: a caller that stops at a cut line never pays for the rest of it. A set
    ``stop`` ends the lines early (a call that timed out tells the worker thread so).
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending = ""  # the start of a line whose end is not read yet
    skipping = False  # reading through the rest of a cut line
    while stop is None or not stop.is_set():
        block = file.read(_BLOCK)
        pending += decoder.decode(block, final=not block)
        lines = pending.splitlines()
        tail = ""
        # Until the end, the last line may go on in the next block; a last "\r" may be
        # the first half of "\r\n", so it waits too.
        if block and lines and (pending[-1] not in _BREAKS or pending[-1] == "\r"):
            tail = lines.pop() + ("\r" if pending[-1] == "\r" else "")
        pending = tail
        if skipping and lines:
            del lines[0]  # the end of the cut line
            skipping = False
        if lines and max(map(len, lines)) > limit:
            yield from ((line[:limit], True) if len(line) > limit else (line, False) for line in lines)
        else:
            # Tuples made in C: a line costs a fraction of a microsecond.
            yield from zip(lines, repeat(False))
        if len(pending) - pending.endswith("\r") > limit:
            if not skipping:
                yield pending[:limit], True
                skipping = True
            pending = "\r" if pending.endswith("\r") else ""
        if not block:
            return
