"""A Server-Sent Events decoder (the WHATWG event-stream format), fed one line at a time."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SSEDecoder", "ServerSentEvent"]


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    event: str
    data: str
    id: str | None


class SSEDecoder:
    """Collects ``field: value`` lines until a blank line dispatches an event.

    Comment lines (``: heartbeat``) are skipped; ``id`` is only the id given in the event itself
    (the stream's last id is the caller's to remember: deltas come without one).
    """

    __slots__ = ("_data", "_event", "_id")

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, line: str) -> ServerSentEvent | None:
        """One line without its end of line; an event when ``line`` is blank and one is due."""
        if not line:
            if not self._data and not self._event:
                return None
            event = ServerSentEvent(self._event or "message", "\n".join(self._data), self._id)
            self._event, self._data, self._id = "", [], None
            return event
        if line.startswith(":"):
            return None
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        return None
