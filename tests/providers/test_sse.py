from __future__ import annotations

import pytest

from app.providers.sse import ServerSentEvent, SSEDecoder

STREAM = (
    b": keep-alive comment\n\n"
    b'event: message_start\ndata: {"a": 1}\n\n'
    b"data: line one\ndata: line two\r\n\r\n"
    b"id: 7\ndata:no-space\n\n"
    b"event: ping\n\n" + "data: caf\u00e9 \u2014 ok\r\r\n".encode()  # no data: nothing dispatched
)
EXPECTED = [
    ServerSentEvent("message_start", '{"a": 1}'),
    ServerSentEvent("message", "line one\nline two"),
    ServerSentEvent("message", "no-space", id="7"),
    ServerSentEvent("message", "café — ok", id="7"),
]


def test_whole_stream() -> None:
    assert SSEDecoder().feed(STREAM) == EXPECTED


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 64])
def test_any_chunking_gives_the_same_events(size: int) -> None:
    # Network chunks split lines, CRLF pairs and multi-byte characters anywhere.
    decoder = SSEDecoder()
    events = []
    for start in range(0, len(STREAM), size):
        events += decoder.feed(STREAM[start : start + size])
    assert events == EXPECTED


def test_unterminated_event_is_not_dispatched() -> None:
    assert SSEDecoder().feed(b"data: half") == []
