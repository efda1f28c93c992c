"""The client's exceptions, one tree::

    CtxsvcError                 everything this client raises
    ├── TransportError          no HTTP answer: connection refused or reset, timeout (after retries)
    ├── StreamError             an event stream could not be resumed
    └── ProblemError            an HTTP error answer (application/problem+json), with status,
        │                       code, detail and the whole body
        ├── InvalidInputError   400, 413, 415, 422: the request is wrong (an id in its body or
        │                       query that names nothing included); fix it, do not retry
        ├── AuthenticationError 401: missing or wrong API key
        ├── NotFoundError       404: the session, turn, model or checkpoint the path names does
        │                       not exist
        ├── ConflictError       409: the session's state forbids it now
        │   └── BusyError       409 ``busy``: another turn is running (``turn_id`` names it)
        ├── RateLimitedError    429: slow down (``retry_after`` seconds, when given)
        ├── ProviderError       502, 504: the model provider failed or did not answer in time
        └── UnavailableError    503 and other 5xx: the service or a dependency is down

``code`` is the service's stable machine code (``session_not_found``, ``busy``,
``summary_retries_exhausted``, ...): branch on the class for the family, on ``code`` within it.
"""

from __future__ import annotations

from typing import Any

import httpx

__all__ = [
    "AuthenticationError",
    "BusyError",
    "ConflictError",
    "CtxsvcError",
    "InvalidInputError",
    "NotFoundError",
    "ProblemError",
    "ProviderError",
    "RateLimitedError",
    "StreamError",
    "TransportError",
    "UnavailableError",
    "problem_from_response",
]


class CtxsvcError(Exception):
    """Base class of everything this client raises."""


class TransportError(CtxsvcError):
    """The request got no HTTP answer (after the retries it was allowed)."""


class StreamError(CtxsvcError):
    """An event stream broke and could not be resumed within the retries allowed."""


class ProblemError(CtxsvcError):
    """An error answer of the service: ``status``, ``code``, ``detail`` and the parsed ``body``
    (``{}`` when the answer was not JSON, e.g. a proxy's page; ``code`` is then ``None``)."""

    def __init__(self, status: int, body: dict[str, Any], response: httpx.Response) -> None:
        self.status = status
        self.body = body
        self.response = response
        code = body.get("code")
        self.code: str | None = code if isinstance(code, str) else None
        detail = body.get("detail")
        self.detail: str = detail if isinstance(detail, str) else response.reason_phrase
        self.title: str | None = body.get("title") if isinstance(body.get("title"), str) else None
        super().__init__(f"{status} {self.code or 'error'}: {self.detail}")


class InvalidInputError(ProblemError):
    """400, 413, 415 or 422: the request itself is wrong (``body['errors']`` for 422 shapes)."""


class AuthenticationError(ProblemError):
    """401: the API key is missing or not one the service accepts."""


class NotFoundError(ProblemError):
    """404: the resource the path names does not exist (an id inside a body or query that names
    nothing is an ``InvalidInputError``: 422, ``unknown_model_id``, ``unknown_compaction_id``,
    ``unknown_tool_call``, ..., with ``body['field']`` naming where it is)."""


class ConflictError(ProblemError):
    """409: the state forbids it now (``session_active``, ``reload_required``, ...)."""


class BusyError(ConflictError):
    """409 ``busy``: another turn of the session is running; ``turn_id`` is that turn."""

    @property
    def turn_id(self) -> str | None:
        value = self.body.get("turn_id")
        return value if isinstance(value, str) else None


class RateLimitedError(ProblemError):
    """429: slow down; ``retry_after`` is the server's ``Retry-After`` in seconds, if any."""

    @property
    def retry_after(self) -> float | None:
        return retry_after_seconds(self.response)


class ProviderError(ProblemError):
    """502 or 504: the model provider failed, answered nonsense or did not answer in time."""


class UnavailableError(ProblemError):
    """503 (or another 5xx): the service or one of its dependencies is unavailable."""


_BY_STATUS: dict[int, type[ProblemError]] = {
    400: InvalidInputError,
    401: AuthenticationError,
    404: NotFoundError,
    409: ConflictError,
    413: InvalidInputError,
    415: InvalidInputError,
    422: InvalidInputError,
    429: RateLimitedError,
    502: ProviderError,
    504: ProviderError,
    503: UnavailableError,
}


def retry_after_seconds(response: httpx.Response) -> float | None:
    """``Retry-After`` as seconds (the service sends an integer), ``None`` when absent/unusable."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None  # an HTTP date: not sent by the service; the backoff applies
    return seconds if seconds >= 0 else None


def problem_from_response(response: httpx.Response) -> ProblemError:
    """The exception for an error answer, by status (and ``busy`` by code)."""
    try:
        parsed = response.json()
    except ValueError:
        parsed = None
    body: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
    status = response.status_code
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = UnavailableError if status >= 500 else InvalidInputError
    if cls is ConflictError and body.get("code") == "busy":
        cls = BusyError
    return cls(status, body, response)
