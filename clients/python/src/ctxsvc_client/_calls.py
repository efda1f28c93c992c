"""What a call is, and when it is repeated: shared by ``Client`` and ``AsyncClient``.

A ``Call`` says what to send and how to read the answer; the clients only send it. A call
marked ``idempotent`` may be sent again after a connection error, a 429 or a 503, with
exponential backoff (the server's ``Retry-After`` when it gives one). A call that is not is only
sent again when the connection could not even be opened (nothing reached the service).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import httpx

from ctxsvc_client._errors import retry_after_seconds

__all__ = ["RETRY_STATUSES", "Call", "Retries", "path"]

T = TypeVar("T")

RETRY_STATUSES = frozenset({429, 503})
# A Retry-After longer than this is not waited for: the error goes to the caller.
MAX_RETRY_AFTER_SECONDS = 60.0


def path(*segments: str) -> str:
    """``/v1/...`` with every caller-given segment percent-encoded (ids are free text)."""
    return "/" + "/".join(quote(s, safe="") for s in segments)


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    method: str
    url: str
    parse: Callable[[httpx.Response], T]
    params: Mapping[str, Any] | None = None
    json: Any = None
    idempotent: bool = False
    timeout: float | None = None  # None: the client's
    # Statuses ``parse`` reads although they are not 2xx (``/readyz``'s 503).
    accept: frozenset[int] = field(default_factory=frozenset)


@dataclass(frozen=True, slots=True)
class Retries:
    """How often and how long to wait; ``backoff`` doubles per retry, up to ``max_backoff``."""

    max_retries: int = 2
    backoff: float = 0.5
    max_backoff: float = 8.0

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds before retry number ``retry`` (1, 2, ...): the server's ``Retry-After``, or
        the backoff with jitter (half to all of it, so many clients do not retry in step)."""
        if retry_after is not None:
            return retry_after
        ceiling = min(self.max_backoff, self.backoff * 2.0 ** (retry - 1))
        return float(ceiling * (0.5 + random.random() / 2))

    def after_error(self, call: Call[Any], retry: int, error: httpx.TransportError) -> float | None:
        """The delay before sending ``call`` again after ``error``, or ``None``: give up."""
        if retry > self.max_retries:
            return None
        # A connection that never opened carried nothing: any call may go again.
        if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout) or call.idempotent:
            return self.delay(retry)
        return None

    def after_response(self, call: Call[Any], retry: int, response: httpx.Response) -> float | None:
        """The delay before sending ``call`` again after an error ``response``, or ``None``."""
        if retry > self.max_retries or not call.idempotent:
            return None
        if response.status_code not in RETRY_STATUSES:
            return None
        retry_after = retry_after_seconds(response)
        if retry_after is not None and retry_after > MAX_RETRY_AFTER_SECONDS:
            return None
        return self.delay(retry, retry_after)
