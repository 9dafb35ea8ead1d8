"""One MCP server's log file: our notes, the server's stderr (stdio) and the log messages it
sends, appended by every attempt to connect.

The file is opened for an attempt (moved to ``NAME.log.1`` first when it has grown past
:data:`LOG_ROTATE_BYTES`) and handed to the SDK as a stdio server's stderr; a note written
between attempts opens it for that one line.
"""

from __future__ import annotations

import logging
import re
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, TextIO

from roost.daemon._paths import ensure_private_dir, private_opener

log = logging.getLogger(__name__)

#: A log file over this size is moved to ``NAME.log.1`` when the server (re)starts.
LOG_ROTATE_BYTES = 1 << 20
#: How much of an attempt's end :meth:`ServerLog.tail` reads, and how long a line it keeps.
TAIL_BYTES = 16 * 1024
TAIL_LINE = 300
_NOTE = re.compile(r"--- \d{4}-\d\d-\d\d \d\d:\d\d:\d\d roost: ")


class ServerLog:
    """The log file of the server named ``name`` (the name our warnings use) at ``path``."""

    def __init__(self, path: Path, name: str) -> None:
        self.path = path
        self._name = name
        self._file: TextIO | None = None
        self._start = 0  # where the last attempt's lines begin

    @contextmanager
    def attempt(self) -> Iterator[TextIO]:
        """The file, open for one attempt: notes go into it until the attempt ends."""
        ensure_private_dir(self.path.parent)
        try:
            if self.path.stat().st_size > LOG_ROTATE_BYTES:
                self.path.replace(self.path.with_name(self.path.name + ".1"))
        except FileNotFoundError:
            pass
        # A real file: the SDK hands it to the child as its stderr.
        with open(self.path, "a", encoding="utf-8", buffering=1, opener=private_opener) as file:
            self._file = file
            self._start = file.tell()
            try:
                yield file
            finally:
                self._file = None

    def note(self, line: str) -> None:
        """Append one line of ours, stamped with the time."""
        text = f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} roost: {line}\n"
        try:
            if self._file is not None:
                self._file.write(text)
            else:  # between attempts
                with open(self.path, "a", encoding="utf-8", opener=private_opener) as f:
                    f.write(text)
        except OSError as exc:  # a log that cannot be written must not stop the server
            log.warning("MCP server %s: cannot write %s: %s", self._name, self.path, exc)

    def tail(self, count: int) -> tuple[str, ...]:
        """The last ``count`` lines the server wrote to stderr in the last attempt (our
        notes left out; at most :data:`TAIL_BYTES` read, lines cut to :data:`TAIL_LINE`
        characters); none when the log cannot be read."""
        try:
            with open(self.path, "rb") as file:
                end = file.seek(0, 2)
                file.seek(max(self._start, end - TAIL_BYTES))
                text = file.read().decode("utf-8", "replace")
        except OSError:
            return ()
        lines = [line.rstrip() for line in text.splitlines() if line.strip() and not _NOTE.match(line)]
        return tuple(line if len(line) <= TAIL_LINE else line[:TAIL_LINE] + "…" for line in lines[-count:])
