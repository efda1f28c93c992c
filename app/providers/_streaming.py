"""The streaming call shared by the HTTP adapters: keys, retries, timeouts, SSE reading.

A subclass supplies the protocol: its URL and headers, the encoding, the mapping of an HTTP
error response to a ``ProviderError``, and an ``Assembler`` that turns server-sent events into a
``ModelResponse``. Everything about *when* to retry lives here, in one place:

- only ``retryable`` errors (429, 5xx, 529, connection failures) are retried, and only while no
  semantic output (text, reasoning, tool call) has arrived — a resubmission after that would
  show the user a second, different answer;
- ``Retry-After`` (seconds, or OpenAI's ``retry-after-ms``) replaces the computed backoff;
- the total budget covers every attempt and pause; no pause may run past it.

A server that ignores ``stream: true`` and answers ``200 application/json`` with the complete
response (LiteLLM's mock, some proxies) is read as that response: the protocol turns it into the
events its stream would have carried (``answer_events``), so one assembler checks both. A
protocol error says what was received: status, content type and size (never the bytes).

The transport is aiohttp (``app.providers.http_client``); its failures are ``ProviderError``s:
its timeouts (``ServerTimeoutError``: connecting, or no bytes for ``Timeouts.idle``) are
``timeout``; every other ``aiohttp.ClientError`` (refused, reset or dropped connections, a body
cut short, an unreadable response) is a retryable ``server_error``. aiohttp's timeout errors are
``TimeoutError``s too, so the adapters' own deadlines (first byte, total) are told apart from
them by asking their scope whether it expired. A ``base_url`` ``app.providers.urls`` refuses, or
a proxy variable aiohttp could not use, fails every call with ``bad_request`` before anything
is sent.
"""

from __future__ import annotations

import abc
import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import aiohttp

from app.core.caching.breakpoints import CachePlan
from app.core.content import Item
from app.providers._bodies import MAX_ANSWER_BYTES, Received, read_to_end, read_whole
from app.providers._connection import connection_failure
from app.providers.base import (
    ModelResponse,
    ProviderConfig,
    ProviderError,
    RetryPolicy,
    StreamSink,
    Timeouts,
    api_key_problem,
)
from app.providers.call_stats import note_attempt, note_first_byte, note_retry, note_sent
from app.providers.destinations import DestinationRefused
from app.providers.http_client import DIRECT, JsonBody, ProviderHTTP
from app.providers.sse import ServerSentEvent, SSEDecoder
from app.providers.urls import base_url_problem, destination_problem

__all__ = ["Assembler", "StreamState", "StreamingClient", "protocol_error"]

logger = logging.getLogger(__name__)


class StreamState:
    """What one attempt has delivered so far; decides whether a retry is still safe."""

    def __init__(self, sink: StreamSink | None) -> None:
        self._sink = sink
        self.semantic = False  # any text, reasoning or tool-call output received
        self.emitted = False  # any delta handed to the sink (the draft to clear on failure)

    async def text(self, delta: str) -> None:
        if not delta:
            return
        self.semantic = True
        if self._sink is not None:
            self.emitted = True
            await self._sink.on_text_delta(delta)

    async def reasoning(self, delta: str) -> None:
        if not delta:
            return
        self.semantic = True
        if self._sink is not None:
            self.emitted = True
            await self._sink.on_reasoning_delta(delta)

    def tool_call_output(self) -> None:
        self.semantic = True


class Assembler(Protocol):
    async def feed(self, event: ServerSentEvent) -> bool:
        """Take one event; ``True`` once the response is complete (stop reading)."""
        ...

    def finish(self) -> ModelResponse:
        """The completed response; a ``protocol`` error if the stream never completed."""
        ...


def protocol_error(what: str, state: StreamState | None = None) -> ProviderError:
    """The provider's answer does not follow its protocol."""
    return ProviderError.of(
        "protocol", what, semantic_output_received=state is not None and state.semantic
    )


class StreamingClient(abc.ABC):
    """A ``ModelClient`` over the shared ``ProviderHTTP`` session (never created per call)."""

    # Says when a request is written (``call_stats.note_sent``): the turn runner commits the
    # step before it meanwhile (``app.services.turns.overlap``).
    signals_sent = True

    def __init__(
        self,
        http: ProviderHTTP,
        config: ProviderConfig,
        *,
        env: Mapping[str, str],
        retry: RetryPolicy | None = None,
        timeouts: Timeouts | None = None,
    ) -> None:
        self._http = http
        self._config = config
        self._env = env
        self._retry = retry or RetryPolicy()
        self._timeouts = timeouts = timeouts or Timeouts()
        # Fixed per adapter, so a call builds none of them. A URL registered before it was
        # checked (``app.providers.urls``) fails each call instead of the adapter's creation.
        self._endpoint = self._url()
        url_problem = base_url_problem(config.base_url) or destination_problem(
            config.base_url, allow_private=http.allow_private_hosts
        )
        self._route = DIRECT if url_problem else http.route(self._endpoint)
        self._problem = (
            f"provider.base_url {url_problem}; register the model again with a valid base_url"
            if url_problem
            else self._route.problem
        )
        self._request_timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=timeouts.connect, sock_read=timeouts.idle
        )

    @property
    def config(self) -> ProviderConfig:
        return self._config

    # -- what a protocol supplies -------------------------------------------------------------

    @abc.abstractmethod
    def body(self, request: Mapping[str, Any], caching: CachePlan | None = None) -> bytes:
        """The exact body sent for ``request`` (streaming on): the protocol's encoding, with
        the breakpoints of ``caching``."""

    @abc.abstractmethod
    def _url(self) -> str: ...

    @abc.abstractmethod
    def _headers(self, api_key: str | None) -> dict[str, str]:
        """The request headers; without a key, no authentication header."""

    @abc.abstractmethod
    def _http_error(self, status: int, body: bytes, headers: Mapping[str, str]) -> ProviderError:
        """Map a non-2xx response to an error (nothing was streamed yet)."""

    @abc.abstractmethod
    def _assembler(self, state: StreamState) -> Assembler: ...

    @abc.abstractmethod
    def _answer_events(self, answer: Any) -> list[ServerSentEvent]:
        """The events of the stream that would have carried ``answer``, a complete
        non-streamed response (decoded JSON); a ``protocol`` error if it is none."""

    # -- the call -------------------------------------------------------------------------------

    async def complete(
        self,
        request: dict[str, Any],
        *,
        sink: StreamSink | None = None,
        caching: CachePlan | None = None,
        conversation: Sequence[Item] | None = None,  # the request says it all to a provider
    ) -> ModelResponse:
        if self._problem is not None:
            raise ProviderError.of(
                "bad_request", f"cannot call model {self._config.model_name}: {self._problem}"
            )
        api_key = self._api_key()
        content = self.body(request, caching)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeouts.total
        attempt = 0
        while True:
            attempt += 1
            note_attempt(attempt)
            state = StreamState(sink)
            try:
                try:
                    async with asyncio.timeout_at(deadline) as budget:
                        return await self._attempt(content, api_key, state)
                except TimeoutError:
                    if not budget.expired():
                        raise
                    raise ProviderError.of(
                        "timeout",
                        f"the model call did not finish within {self._timeouts.total:g} s; "
                        "retry later or raise the provider timeout",
                        semantic_output_received=state.semantic,
                    ) from None
                finally:
                    note_sent()  # the attempt ended: nothing more of it will be written
            except ProviderError as failure:
                error = _scrub(failure, api_key)
                if state.emitted and sink is not None:
                    await sink.on_draft_cleared()
                delay = self._retry_delay(error, attempt, state, deadline - loop.time())
                if delay is None:
                    if error is failure:
                        raise
                    raise error from None
                note_retry(error.code)
                logger.warning(
                    "model call to %s failed (%s, HTTP %s); retry %d of %d in %.3f s",
                    self._config.model_name,
                    error.code,
                    error.status,
                    attempt,
                    self._retry.max_attempts - 1,
                    delay,
                )
                await asyncio.sleep(delay)

    def _request_headers(self, api_key: str | None) -> dict[str, str]:
        headers = self._headers(api_key)
        if self._route.headers:
            headers.update(self._route.headers)  # a proxy's credentials (plain HTTP)
        return headers

    def _api_key(self) -> str | None:
        """The key from the environment; ``None`` for a model that needs none."""
        problem = api_key_problem(self._config.api_key_env, self._env)
        if problem is not None:
            raise ProviderError.of(
                "auth", f"cannot call model {self._config.model_name}: {problem[1]}"
            )
        name = self._config.api_key_env
        return self._env[name].strip() if name is not None else None

    def _retry_delay(
        self, error: ProviderError, attempt: int, state: StreamState, remaining: float
    ) -> float | None:
        if not error.retryable or state.semantic or attempt >= self._retry.max_attempts:
            return None
        if error.retry_after is not None:
            if error.retry_after > self._retry.max_retry_after:
                return None
            delay = error.retry_after
        else:
            delay = self._retry.delay(attempt)
        return delay if delay < remaining else None

    def _refusal(
        self, status: int, body: bytes, headers: Mapping[str, str], api_key: str | None
    ) -> ProviderError:
        error = self._http_error(status, body, headers)
        if error.code == "auth" and api_key is None:
            # "The provider refused the API key" would puzzle the owner of a keyless model.
            return ProviderError.of(
                "auth",
                f"the provider asks for an API key (HTTP {status}) and model "
                f"{self._config.model_name} has none; set api_key_env in the model's provider "
                "settings to the name of the environment variable that holds it",
                status=status,
            )
        return error

    async def _attempt(
        self, content: bytes, api_key: str | None, state: StreamState
    ) -> ModelResponse:
        timeouts = self._timeouts
        route = self._route
        response: aiohttp.ClientResponse | None = None
        try:
            try:
                async with asyncio.timeout(timeouts.first_byte) as waiting:
                    response = await self._http.session().post(
                        self._endpoint,
                        data=JsonBody(content),
                        headers=self._request_headers(api_key),
                        proxy=route.proxy,
                        proxy_headers=route.proxy_headers,
                        timeout=self._request_timeout,
                        # httpx followed none; a provider that redirects a POST is refused.
                        allow_redirects=False,
                    )
                    status = response.status
                    if logger.isEnabledFor(logging.DEBUG):
                        logger.debug("provider request: POST %s: HTTP %d", self._endpoint, status)
                    if not 200 <= status < 300:
                        body = await response.read()
                        raise self._refusal(status, body, response.headers, api_key)
                    stream = response.content
                    chunk = await stream.readany()
                    note_first_byte()
            except TimeoutError:
                if not waiting.expired():
                    raise  # aiohttp's own (below)
                raise ProviderError.of(
                    "timeout",
                    f"the provider sent nothing within {timeouts.first_byte:g} s",
                ) from None
            received = Received(status, response.headers.get("content-type"))
            try:
                if received.is_json:
                    return await self._answer(stream, chunk, received, state)
                return await self._stream(stream, chunk, received, state)
            except ProviderError as error:
                if error.code != "protocol":
                    raise
                raise _with_detail(error, f"{error.detail} ({received.describe()})") from None
        except aiohttp.ServerTimeoutError as exc:
            # Connecting took longer than Timeouts.connect, or nothing came for Timeouts.idle.
            raise ProviderError.of(
                "timeout",
                f"the provider stream stalled ({type(exc).__name__}); retry later",
                semantic_output_received=state.semantic,
            ) from None
        except aiohttp.ClientError as exc:
            refused = exc.os_error if isinstance(exc, aiohttp.ClientConnectorError) else None
            if isinstance(refused, DestinationRefused):
                # The rule of ``app.providers.destinations``: no connection was made.
                raise ProviderError.of(
                    "bad_request",
                    f"cannot call model {self._config.model_name}: provider.base_url's host "
                    f"{refused}",
                ) from None
            # Connection refused, reset, or closed before the stream completed.
            raise ProviderError.of(
                "server_error",
                connection_failure(self._endpoint, exc),
                semantic_output_received=state.semantic,
                retryable=True,
            ) from None
        finally:
            if response is not None:
                # Back to the pool when the body was read to its end; closed otherwise (an
                # error, a cancelled call).
                response.release()

    async def _stream(
        self,
        stream: aiohttp.StreamReader,
        chunk: bytes,
        received: Received,
        state: StreamState,
    ) -> ModelResponse:
        assembler = self._assembler(state)
        decoder = SSEDecoder()
        while chunk:
            received.add(chunk)
            for event in decoder.feed(chunk):
                if await assembler.feed(event):
                    result = assembler.finish()
                    await read_to_end(stream)
                    return result
            chunk = await stream.readany()
        return assembler.finish()

    async def _answer(
        self,
        stream: aiohttp.StreamReader,
        chunk: bytes,
        received: Received,
        state: StreamState,
    ) -> ModelResponse:
        """A complete JSON answer, read whole, fed to the assembler as its stream's events."""
        body = await read_whole(stream, chunk, received)
        if body is None:
            raise protocol_error(f"the JSON answer is larger than {MAX_ANSWER_BYTES} bytes")
        try:
            answer = json.loads(body)
        except (ValueError, RecursionError):
            raise protocol_error("the JSON answer does not parse") from None
        assembler = self._assembler(state)
        for event in self._answer_events(answer):
            if await assembler.feed(event):
                break
        return assembler.finish()


def _scrub(error: ProviderError, api_key: str | None) -> ProviderError:
    """Never echo a key: some providers quote (part of) the key they were given."""
    if api_key is None or api_key not in error.detail:
        return error
    return _with_detail(error, error.detail.replace(api_key, "[redacted]"))


def _with_detail(error: ProviderError, detail: str) -> ProviderError:
    return ProviderError.of(
        error.code,
        detail,
        semantic_output_received=error.semantic_output_received,
        retryable=error.retryable,
        retry_after=error.retry_after,
        status=error.status,
    )
