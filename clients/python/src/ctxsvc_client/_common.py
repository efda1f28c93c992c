"""What ``Client`` and ``AsyncClient`` share besides the calls: options, headers, events."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from ctxsvc_client._calls import Call
from ctxsvc_client._errors import TransportError
from ctxsvc_client._models import Event
from ctxsvc_client._sse import ServerSentEvent

__all__ = [
    "STREAM_RECONNECTS",
    "ClientOptions",
    "event_of",
    "method_signature",
    "resume_headers",
    "transport_error",
]

__version__ = "0.1.0"

# Failed reconnections in a row after which ``events`` gives up (backoff between them).
STREAM_RECONNECTS = 10


@dataclass(frozen=True, slots=True)
class ClientOptions:
    base_url: str
    headers: dict[str, str]
    timeout: httpx.Timeout
    stream_timeout: httpx.Timeout

    @classmethod
    def make(
        cls,
        base_url: str,
        api_key: str | None,
        timeout: float,
        stream_read_timeout: float,
        headers: Mapping[str, str] | None,
    ) -> ClientOptions:
        merged = {"user-agent": f"ctxsvc-client/{__version__}", "accept": "application/json"}
        merged.update(headers or {})
        if api_key is not None:
            merged["authorization"] = f"Bearer {api_key}"
        return cls(
            base_url=base_url.rstrip("/"),
            headers=merged,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            # A stream is quiet between updates; the service sends a heartbeat every 15 s, so a
            # read that waits longer than this means the connection is gone.
            stream_timeout=httpx.Timeout(timeout, read=stream_read_timeout),
        )

    def timeout_for(self, call: Call[Any]) -> httpx.Timeout:
        if call.timeout is None or call.timeout <= (self.timeout.read or 0):
            return self.timeout
        return httpx.Timeout(call.timeout, connect=self.timeout.connect)


def method_signature(function: Callable[..., Any]) -> inspect.Signature:
    """``function``'s signature with a leading ``self``, for the method made of it (so that
    ``help()`` and IDEs show the builder's parameters)."""
    signature = inspect.signature(function)
    this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    returns = signature.return_annotation  # "Call[Session]": the method returns the Session
    if isinstance(returns, str) and returns.startswith("Call[") and returns.endswith("]"):
        returns = returns[len("Call[") : -1]
    return signature.replace(
        parameters=[this, *signature.parameters.values()], return_annotation=returns
    )


def resume_headers(last_event_id: int | None) -> dict[str, str]:
    """``Last-Event-ID`` for a stream that resumes after ``last_event_id`` (none: replay all)."""
    headers = {"accept": "text/event-stream"}
    if last_event_id is not None:
        headers["last-event-id"] = str(last_event_id)
    return headers


def event_of(sse: ServerSentEvent) -> Event:
    event = Event.model_validate_json(sse.data)
    if event.sequence is None and sse.id is not None and sse.id.isdigit():
        # The id line is the sequence (the data carries it too; kept for other senders).
        event = event.model_copy(update={"sequence": int(sse.id)})
    return event


def transport_error(call: Call[Any], error: httpx.TransportError) -> TransportError:
    return TransportError(f"{call.method} {call.url}: {type(error).__name__}: {error}")
