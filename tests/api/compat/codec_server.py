"""A real HTTP server on loopback that answers with a codec alone: what the official SDKs parse.

``CodecServer(codec)`` runs an aiohttp server in a background thread (so the SDKs' sync clients
can call it). Every POST, whatever its path, is read with ``codec.decode`` (a refusal is answered
with ``codec.render_error`` and status 422, as the endpoint does) and recorded in ``requests``;
the next scripted ``Answer`` is then sent back: ``codec.render`` as JSON, or, when the request
asked to stream, the bytes of ``codec.render_stream`` as ``text/event-stream``, chunk by chunk.
No proxy service and no session is involved: the SDK meets the codec's output as it is.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from types import TracebackType

from aiohttp import web

from app.core.errors import InvalidInput
from app.providers.base import ModelResponse
from app.services.proxy.contract import AnswerEvent, Codec, Completed, ProxyRequest

__all__ = ["Answer", "CodecServer"]


@dataclass(frozen=True)
class Answer:
    """One scripted answer: ``response``, streamed as ``deltas`` then ``Completed(response)``;
    with ``fail`` set the stream raises it after the deltas instead of completing."""

    response: ModelResponse
    deltas: Sequence[AnswerEvent] = field(default_factory=list)
    fail: Exception | None = None
    response_id: str = "resp_test1"
    model: str | None = None  # the model named in the answer (default: the request's)


class CodecServer:
    def __init__(self, codec: Codec) -> None:
        self.codec = codec
        self.requests: list[ProxyRequest] = []
        self.bodies: list[dict[str, object]] = []
        self._answers: deque[Answer] = deque()
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def enqueue(self, *answers: Answer) -> None:
        self._answers.extend(answers)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        try:
            decoded = self.codec.decode(body)
        except InvalidInput as exc:
            error = self.codec.render_error(422, exc.code, exc.detail)
            return web.json_response(error, status=422)
        self.requests.append(decoded)
        answer = self._answers.popleft()
        model = answer.model or decoded.model
        if not decoded.stream:
            rendered = self.codec.render(
                answer.response, model=model, response_id=answer.response_id
            )
            return web.Response(text=json.dumps(rendered), content_type="application/json")
        reply = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await reply.prepare(request)
        stream = self.codec.render_stream(
            _events(answer), model=model, response_id=answer.response_id
        )
        async for chunk in stream:
            await reply.write(chunk)
        await reply.write_eof()
        return reply

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_route("POST", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def __enter__(self) -> CodecServer:
        self._thread = threading.Thread(target=self._run, name="codec-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=30):
            raise RuntimeError("the codec server did not start")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(timeout=30)


async def _events(answer: Answer) -> AsyncIterator[AnswerEvent]:
    for event in answer.deltas:
        yield event
    if answer.fail is not None:
        raise answer.fail
    yield Completed(answer.response)
