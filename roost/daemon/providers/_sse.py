"""Server-sent events from bytes, sans IO: one decoder for every streaming provider."""

from __future__ import annotations


class SSEDecoder:
    """``feed(bytes) -> [(event, data)]``.

    Lines end in LF or CRLF (a lone CR, which the spec also allows, is not sent by the
    vendors); ``data`` lines of one event are joined with LF; comments (``: keep-alive``,
    which some servers send) and ``id``/``retry`` are ignored. The event name is
    ``"message"`` unless an ``event:`` line says otherwise.
    """

    def __init__(self) -> None:
        self._buffer = b""
        self._event = ""
        self._data: list[str] = []

    def feed(self, chunk: bytes) -> list[tuple[str, str]]:
        """Add bytes; return the events now complete, in order."""
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        events: list[tuple[str, str]] = []
        for raw in lines:
            line = raw.decode("utf-8", errors="replace").rstrip("\r")
            if not line:
                if self._data:
                    events.append((self._event or "message", "\n".join(self._data)))
                self._event, self._data = "", []
                continue
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "data":
                self._data.append(value)
            elif name == "event":
                self._event = value
        return events
