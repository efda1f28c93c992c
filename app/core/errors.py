"""The error tree of the service.

Every expected failure is a ``ServiceError`` with a stable machine ``code`` (spec §8)
and a human ``detail`` that says what was wrong and what to do. The ``kind`` says which family of
HTTP status fits; the API's one error handler maps it (the core knows no HTTP)::

    ServiceError
    ├── InvalidInput        bad request body or values (400 / 422)
    ├── NotFound            an id that names nothing (404)
    ├── Conflict            the state forbids it now: busy, reload_required, ... (409)
    ├── TooLarge            over a size cap (413)
    ├── Unauthorized        missing or wrong API key (401)
    ├── Forbidden           a key without the scope an operation needs (403)
    ├── RateLimited         a provider asked us to slow down, or a tenant is over its limit (429)
    ├── UpstreamError       a provider failed or answered nonsense (502)
    ├── Unavailable         a dependency is down, e.g. the database (503)
    └── UpstreamTimeout     a provider did not answer in time (504)
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

__all__ = [
    "Conflict",
    "ErrorKind",
    "Forbidden",
    "InvalidInput",
    "NotFound",
    "RateLimited",
    "ServiceError",
    "TooLarge",
    "Unauthorized",
    "Unavailable",
    "UpstreamError",
    "UpstreamTimeout",
]

ErrorKind = Literal[
    "invalid",
    "unprocessable",
    "not_found",
    "conflict",
    "too_large",
    "unauthorized",
    "forbidden",
    "rate_limited",
    "upstream",
    "unavailable",
    "timeout",
]


class ServiceError(Exception):
    """An expected failure: stable ``code``, human ``detail``, optional structured ``extra``."""

    kind: ClassVar[ErrorKind] = "invalid"

    def __init__(self, code: str, detail: str, **extra: Any) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail
        self.extra = extra


class InvalidInput(ServiceError):
    kind: ClassVar[ErrorKind] = "unprocessable"


class NotFound(ServiceError):
    kind: ClassVar[ErrorKind] = "not_found"


class Conflict(ServiceError):
    kind: ClassVar[ErrorKind] = "conflict"


class TooLarge(ServiceError):
    kind: ClassVar[ErrorKind] = "too_large"


class Unauthorized(ServiceError):
    kind: ClassVar[ErrorKind] = "unauthorized"


class Forbidden(ServiceError):
    kind: ClassVar[ErrorKind] = "forbidden"


class RateLimited(ServiceError):
    kind: ClassVar[ErrorKind] = "rate_limited"


class UpstreamError(ServiceError):
    kind: ClassVar[ErrorKind] = "upstream"


class Unavailable(ServiceError):
    kind: ClassVar[ErrorKind] = "unavailable"


class UpstreamTimeout(ServiceError):
    kind: ClassVar[ErrorKind] = "timeout"
