"""An incremental Server-Sent Events decoder (WHATWG HTML "Server-sent events", §9.2.6).

Providers stream ``text/event-stream``; chunks from the network split lines and even UTF-8
characters anywhere, so the decoder keeps the unfinished tail between ``feed`` calls. An event
still open when the stream ends is discarded, as the standard says.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

__all__ = ["SSEDecoder", "ServerSentEvent"]

_EOL = re.compile(r"\r\n|\n|\r")


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    event: str = "message"
    data: str = ""
    id: str | None = None


class SSEDecoder:
    def __init__(self) -> None:
        self._text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Decode ``chunk`` and return the events it completed (possibly none)."""
        self._buffer += self._text.decode(chunk)
        events: list[ServerSentEvent] = []
        start = 0
        buffer = self._buffer
        while True:
            match = _EOL.search(buffer, start)
            if match is None:
                break
            if match.group() == "\r" and match.end() == len(buffer):
                break  # maybe the first half of a CRLF split across chunks
            event = self._line(buffer[start : match.start()])
            if event is not None:
                events.append(event)
            start = match.end()
        self._buffer = buffer[start:]
        return events

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment, e.g. a keep-alive
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None  # "retry" and unknown fields are ignored

    def _dispatch(self) -> ServerSentEvent | None:
        if not self._data:
            self._event = ""
            return None
        event = ServerSentEvent(
            event=self._event or "message", data="\n".join(self._data), id=self._id
        )
        self._event = ""
        self._data = []
        return event
