"""The one error handler: every failure becomes ``application/problem+json`` (spec §8).

``{type, title, status, detail, code}`` plus structured extras. Expected failures are
``ServiceError``s; request-shape errors come from FastAPI's validation; anything else is a bug and
the only path to a 500: one ``internal_error`` answer naming the request id, which is also on
the log line with the traceback (``UnexpectedErrors``; the exception's text never reaches the
caller).
"""

from __future__ import annotations

import logging
import sys
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api.methods import allowed_methods
from app.core.errors import ErrorKind, ServiceError
from app.core.limits.json_values import MAX_JSON_DEPTH
from app.observability.context import note_problem, request_id_var
from app.storage.outages import (
    OUTAGE_RETRY_AFTER_SECONDS,
    OutageReason,
    Outages,
    describe,
    outage_of,
)

__all__ = [
    "UnexpectedErrors",
    "install_error_handlers",
    "malformed_json",
    "problem_response",
    "service_error_response",
]

log = logging.getLogger("ctxsvc.errors")

_STATUS: dict[ErrorKind, int] = {
    "invalid": 400,
    "unprocessable": 422,
    "not_found": 404,
    "conflict": 409,
    "too_large": 413,
    "unauthorized": 401,
    "forbidden": 403,
    "rate_limited": 429,
    "upstream": 502,
    "unavailable": 503,
    "timeout": 504,
}

# How Python names an integer past ``sys.get_int_max_str_digits()`` digits.
_INT_DIGITS = "integer string conversion"

_HTTP_CODES = {
    # FastAPI's answer for a body it could not read otherwise (the cases above name the cause).
    400: "malformed_json",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    413: "request_too_large",
    415: "unsupported_media_type",
}


def problem_response(
    status: int, code: str, detail: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": f"https://ctxsvc.dev/problems/{code}",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
    }
    body.update({k: v for k, v in extra.items() if k not in body})
    note_problem(code)
    return JSONResponse(
        body, status_code=status, media_type="application/problem+json", headers=headers
    )


def status_of(error: ServiceError) -> int:
    return _STATUS[error.kind]


async def _service_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ServiceError)
    return service_error_response(exc)


def service_error_response(exc: ServiceError) -> JSONResponse:
    """The answer for a ``ServiceError`` (also raised outside a route: ``app.api.key_first``)."""
    headers: dict[str, str] = {}
    retry_after = exc.extra.get("retry_after_seconds")
    if retry_after is not None:
        headers["Retry-After"] = str(int(retry_after))
    if exc.kind == "unauthorized":
        headers["WWW-Authenticate"] = "Bearer"
    return problem_response(status_of(exc), exc.code, exc.detail, headers or None, **exc.extra)


# Problem codes that schema rules raise as their error type (``app/api/schemas/items.py``).
SCHEMA_CODES = frozenset({"unsupported_item"})


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    for error in exc.errors():
        if error.get("type") == "json_invalid" and isinstance(exc.body, str):
            return malformed_json(exc.body, error["loc"][-1], error.get("ctx", {}).get("error", ""))
    errors = [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
        for e in exc.errors()
    ]
    where = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in errors[:5])
    # A schema rule with a problem code of its own (a discriminator's ``custom_error_type``)
    # answers with that code when it is the only rule broken.
    codes = {e["type"] for e in errors}
    (code,) = codes if len(codes) == 1 and codes <= SCHEMA_CODES else ("invalid_request",)
    return problem_response(
        422,
        code,
        f"The request does not match the schema ({where}). See /docs for the expected shape.",
        errors=errors,
    )


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    # FastAPI turns whatever else fails while it reads the JSON body into a bare 400.
    if isinstance(exc.__cause__, RecursionError):
        return problem_response(
            422,
            "invalid_request",
            f"The request body nests arrays and objects too deeply to be read; JSON values "
            f"nest at most {MAX_JSON_DEPTH} levels.",
        )
    if isinstance(exc.__cause__, ValueError) and _INT_DIGITS in str(exc.__cause__):
        # Valid JSON, but past Python's guard against quadratic int parsing (CVE-2020-10735).
        return problem_response(
            422,
            "invalid_request",
            f"The request body holds an integer of more than {sys.get_int_max_str_digits()} "
            "digits; no field takes one.",
        )
    if isinstance(exc.__cause__, UnicodeDecodeError):
        return problem_response(
            400,
            "malformed_json",
            f"The request body is not UTF-8 (byte {exc.__cause__.start}); send UTF-8 JSON.",
        )
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    headers = dict(exc.headers) if exc.headers else {}
    detail = str(exc.detail)
    if exc.status_code == 405:
        allowed = allowed_methods(request.app.routes, request.scope)
        headers["Allow"] = ", ".join(allowed)
        detail = f"{request.method} is not allowed on this path; it takes {headers['Allow']}."
    return problem_response(exc.status_code, code, detail, headers or None)


def malformed_json(document: str, position: int, reason: str) -> JSONResponse:
    """400 for a body that is not JSON: where (line, column) and what is there (excerpt)."""
    line = document.count("\n", 0, position) + 1
    line_start = document.rfind("\n", 0, position) + 1
    line_end = document.find("\n", position)
    line_end = len(document) if line_end == -1 else line_end
    column = position - line_start + 1
    excerpt = document[max(line_start, position - 30) : min(line_end, position + 30)]
    return problem_response(
        400,
        "malformed_json",
        f"The request body is not valid JSON: {reason} at line {line}, column {column} "
        f"(near {excerpt!r}).",
        line=line,
        column=column,
        excerpt=excerpt,
    )


class UnexpectedErrors:
    """Pure ASGI middleware: an exception no handler took becomes one 500 ``internal_error``
    and goes no further.

    Starlette's own last handler sends its 500 and then raises the exception on to the server,
    which closes the connection: a client's next request on that keep-alive connection was
    reset. Here it is logged once, with its traceback and the request id (which the answer
    carries too), and the request ends like any other. When the response had already started
    (a stream), its body is ended instead."""

    def __init__(self, app: ASGIApp, outages: Outages | None = None) -> None:
        self.app = app
        self.outages = outages

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = finished = False

        async def tracked(message: Message) -> None:
            nonlocal started, finished
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                finished = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            request_id = request_id_var.get()
            reason = outage_of(exc)
            if reason is not None:
                await self._outage(scope, receive, send, exc, reason, started, finished)
                return
            log.exception(
                "unexpected error in %s %s (request %s)",
                scope.get("method", "-"),
                scope.get("path", "-"),
                request_id,
                exc_info=exc,
            )
            if not started:
                detail = f"An unexpected error occurred; it was logged as request {request_id}."
                response = problem_response(500, "internal_error", detail, request_id=request_id)
                await response(scope, receive, send)
            elif not finished:
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _outage(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        exc: Exception,
        reason: OutageReason,
        started: bool,
        finished: bool,
    ) -> None:
        """An expected operating condition, not a bug: 503 with ``Retry-After`` and one log
        line per outage (``Outages``), no traceback."""
        if self.outages is not None:
            self.outages.seen(reason, exc)
        else:
            log.error("database unavailable (%s, %s)", reason, describe(exc))
        if not started:
            response = problem_response(
                503,
                "database_unavailable",
                _OUTAGE_DETAIL[reason],
                {"Retry-After": str(OUTAGE_RETRY_AFTER_SECONDS)},
                reason=reason,
            )
            await response(scope, receive, send)
        elif not finished:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


_NOT_DONE = "the request was not completed; retry later"
_OUTAGE_DETAIL: dict[OutageReason, str] = {
    "unreachable": f"the database cannot be reached; {_NOT_DONE}",
    "read_only": f"the database accepts no writes (read-only); {_NOT_DONE}",
    "full": f"the database's disk is full; {_NOT_DONE}",
    "io_error": f"the database's storage failed to read or write; {_NOT_DONE}",
}


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ServiceError, _service_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
