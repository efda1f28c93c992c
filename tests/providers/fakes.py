"""A scriptable, protocol-faithful fake model provider served over real HTTP on loopback.

``FakeProviderServer`` is a small HTTP/1.1 server (keep-alive, chunked streaming) running its own
event loop in a background thread, so sync and async tests (and benchmarks) can use it alike.
Script it with a queue of replies, served in order, one per request:

- ``StreamReply(events)``: a 200 ``text/event-stream`` answer; ``first_byte_delay`` holds back
  the status line, ``event_delay`` paces events, ``drop_after=n`` aborts the connection after
  ``n`` events (no chunked terminator: the client sees a broken stream);
- ``ErrorReply(status, body, headers)``: a JSON error answer, e.g. 429 with ``Retry-After``;
- ``BodyReply(body, content_type, status)``: a whole body, e.g. a complete JSON answer from a
  server that ignores ``stream: true`` (``openai_completion``, ``anthropic_message``).

Every request is recorded (method, path, headers, raw body) in ``server.requests``, and the
time the server spent on it (from its first byte to the reply's last) adds to
``server.serving_seconds``: what a benchmark subtracts as the provider's time. A fixed
``latency`` delays every reply; a client that closes the connection while a reply is held back
a second or more (latency, ``first_byte_delay``, ``event_delay``, an error's ``delay``) is
counted in ``server.abandoned``, as a real provider stops generating then. When the queue is
empty the server answers 500 with the error type ``fake_script_exhausted``, so a test that
asked for too few replies fails loudly — unless a ``responder`` was given: it then decides the
reply from the request (``bench/caching.py``'s fake with a prompt cache). With a ``tls``
context it serves HTTPS. The HTTP/1.1 framing is ``tests.providers.fake_framing``.

The wire builders (``openai_stream``, ``anthropic_stream``, error bodies) live in
``tests.providers.fake_wire`` and are re-exported here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable
from types import TracebackType

from tests.providers.fake_framing import RecordedRequest, read_request, reply_head
from tests.providers.fake_wire import (
    SSE,
    BodyReply,
    ErrorReply,
    FakeToolCall,
    FakeToolUse,
    Reply,
    StreamReply,
    anthropic_error,
    anthropic_error_event,
    anthropic_message,
    anthropic_stream,
    openai_completion,
    openai_error,
    openai_error_chunk,
    openai_stream,
    openai_usage,
)

__all__ = [
    "SSE",
    "BodyReply",
    "ErrorReply",
    "FakeProviderServer",
    "FakeToolCall",
    "FakeToolUse",
    "RecordedRequest",
    "RecordingSink",
    "Reply",
    "StreamReply",
    "anthropic_error",
    "anthropic_error_event",
    "anthropic_message",
    "anthropic_stream",
    "openai_completion",
    "openai_error",
    "openai_error_chunk",
    "openai_stream",
    "openai_usage",
]


# Holds at least this long watch the connection for the client leaving (see ``_held``).
_WATCHED_HOLD = 1.0


class FakeProviderServer:
    def __init__(
        self,
        *,
        latency: float = 0.0,
        responder: Callable[[RecordedRequest], Reply] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.latency = latency
        self._tls = tls
        self._responder = responder
        self._replies: deque[Reply] = deque()
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._arrival = threading.Condition(self._lock)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._ready = threading.Event()
        self._stopped: asyncio.Event | None = None
        self.port = 0
        self._connections = 0
        self._abandoned = 0
        self._serving_seconds = 0.0

    # -- scripting --------------------------------------------------------------------------------

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def wait_for_requests(self, count: int = 1, timeout: float = 30.0) -> list[RecordedRequest]:
        """Block until ``count`` requests have arrived (``TimeoutError`` after ``timeout``)."""
        with self._arrival:
            if not self._arrival.wait_for(lambda: len(self._requests) >= count, timeout):
                raise TimeoutError(f"{len(self._requests)} of {count} requests arrived")
            return list(self._requests)

    async def arrived(self, count: int = 1, *, within: float = 30.0) -> list[RecordedRequest]:
        """``wait_for_requests`` for async tests (the wait runs in a thread)."""
        return await asyncio.to_thread(self.wait_for_requests, count, within)

    @property
    def connections(self) -> int:
        """How many TCP connections clients opened so far."""
        with self._lock:
            return self._connections

    @property
    def abandoned(self) -> int:
        """Requests whose client closed the connection before their reply was sent."""
        with self._lock:
            return self._abandoned

    async def abandoned_by_client(self, count: int = 1, *, within: float = 30.0) -> None:
        """Wait until ``count`` requests were abandoned (``TimeoutError`` after ``within``)."""

        def wait() -> None:
            with self._arrival:
                if not self._arrival.wait_for(lambda: self._abandoned >= count, within):
                    raise TimeoutError(f"{self._abandoned} of {count} requests abandoned")

        await asyncio.to_thread(wait)

    @property
    def serving_seconds(self) -> float:
        """Time spent on requests so far, each from its first line to the reply's last byte."""
        with self._lock:
            return self._serving_seconds

    @property
    def pending_replies(self) -> int:
        with self._lock:
            return len(self._replies)

    @property
    def base_url(self) -> str:
        """``https://`` when the server was given a ``tls`` context (its certificate must name
        127.0.0.1)."""
        scheme = "https" if self._tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.port}"

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> FakeProviderServer:
        self._thread = threading.Thread(target=self._run, name="fake-provider", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=10):
            raise RuntimeError("the fake provider server did not start")
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None or self._stopped is None:
            return
        self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(timeout=10)
        self._thread = None

    def __enter__(self) -> FakeProviderServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _main(self) -> None:
        self._stopped = asyncio.Event()
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0, ssl=self._tls)
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stopped.wait()
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    # -- HTTP -------------------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        with self._lock:
            self._connections += 1
        try:
            while True:
                request = await read_request(reader)
                if request is None:
                    break
                with self._arrival:
                    self._requests.append(request)
                    self._arrival.notify_all()
                    reply = self._next_reply(request)
                served = await self._serve(reply, reader, writer)
                with self._lock:
                    self._serving_seconds += time.perf_counter() - request.arrived_at
                if not served:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)  # type: ignore[arg-type]
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _next_reply(self, request: RecordedRequest) -> Reply:
        """Under the lock: the next scripted reply, else the responder's, else exhausted."""
        if self._replies:
            return self._replies.popleft()
        if self._responder is not None:
            return self._responder(request)
        return _EXHAUSTED

    async def _held(self, reader: asyncio.StreamReader, seconds: float) -> bool:
        """Hold a reply back ``seconds``; ``False`` when the client closed the connection
        meanwhile (counted in ``abandoned``). A client sends nothing before its answer (no
        pipelining), so anything read here is the end of the connection. Holds shorter than
        ``_WATCHED_HOLD`` only sleep: a benchmark's latency keeps costing the fake what it
        did (its serving time is subtracted from the client's)."""
        if seconds <= 0:
            return True
        if seconds < _WATCHED_HOLD:
            await asyncio.sleep(seconds)
            return True
        try:
            sent = await asyncio.wait_for(reader.read(1), seconds)
        except TimeoutError:
            return True
        except ConnectionError:
            sent = b""  # reset rather than closed
        assert not sent, "the fake provider serves one request at a time per connection"
        with self._arrival:
            self._abandoned += 1
            self._arrival.notify_all()
        return False

    async def _serve(
        self, reply: Reply, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Write ``reply``; ``False`` when the connection must not be reused."""
        if isinstance(reply, ErrorReply | BodyReply):
            delay = reply.delay if isinstance(reply, ErrorReply) else 0.0
            if not await self._held(reader, self.latency + delay):
                return False
            if isinstance(reply.body, bytes):
                body, ctype = reply.body, "application/octet-stream"
            elif isinstance(reply.body, str):
                body, ctype = reply.body.encode(), "text/plain"
            else:
                body, ctype = json.dumps(reply.body).encode(), "application/json"
            headers = dict(reply.headers) if isinstance(reply, ErrorReply) else {}
            if isinstance(reply, BodyReply):
                ctype = reply.content_type
            head = reply_head(reply.status, {"content-type": ctype, **headers})
            writer.write(head + f"content-length: {len(body)}\r\n\r\n".encode() + body)
            await writer.drain()
            return True
        if not await self._held(reader, self.latency + reply.first_byte_delay):
            return False
        headers = {"content-type": "text/event-stream", "cache-control": "no-cache"}
        writer.write(
            reply_head(200, {**headers, **reply.headers}) + b"transfer-encoding: chunked\r\n\r\n"
        )
        await writer.drain()
        for index, event in enumerate(reply.events):
            if reply.drop_after is not None and index >= reply.drop_after:
                writer.transport.abort()
                return False
            data = event.encode()
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await writer.drain()
            if reply.event_delay and not await self._held(reader, reply.event_delay):
                return False
        if reply.drop_after is not None and reply.drop_after >= len(reply.events):
            writer.transport.abort()
            return False
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True


class RecordingSink:
    """A ``StreamSink`` that records what a live client would have shown, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    async def on_text_delta(self, text: str) -> None:
        self.events.append(("text", text))

    async def on_reasoning_delta(self, text: str) -> None:
        self.events.append(("reasoning", text))

    async def on_draft_cleared(self) -> None:
        self.events.append(("cleared", ""))

    @property
    def text(self) -> str:
        return "".join(value for kind, value in self.events if kind == "text")


_EXHAUSTED = ErrorReply(
    500,
    {"error": {"type": "fake_script_exhausted", "message": "no scripted reply left"}},
)
