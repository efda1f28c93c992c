"""What every log line written in the current task carries: the request id, and the session and
turn the task works for.

Context variables, so they follow the work and nothing else: the request middleware sets the
request id; a turn runner's task (created while its request was served, so it starts with that
request's id) binds its session and turn ids. A runner that continues a turn on another replica
binds the same turn id there, so every line of a turn carries it wherever it runs.
"""

from __future__ import annotations

import contextvars
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = [
    "RequestScope",
    "WorkIds",
    "bound_work",
    "current_request",
    "current_work",
    "note_problem",
    "request_id_from_header",
    "request_id_var",
    "serving",
]

# 1–128 of these: enough for UUIDs, ULIDs and W3C trace ids; nothing a log line must escape.
_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="-")


@dataclass(slots=True)
class RequestScope:
    """What the request being served has learned about itself so far (mutable: set by the
    handler that builds the answer, read by the middleware's access line)."""

    request_id: str
    # The problem ``code`` of the answer, when it is an error (``problem_response``).
    problem_code: str | None = None


_request: contextvars.ContextVar[RequestScope | None] = contextvars.ContextVar(
    "request_scope", default=None
)


@dataclass(frozen=True, slots=True)
class WorkIds:
    session_id: str | None = None
    turn_id: str | None = None


_NO_WORK = WorkIds()
_work: contextvars.ContextVar[WorkIds] = contextvars.ContextVar("work_ids", default=_NO_WORK)


def request_id_from_header(value: str) -> str:
    """The caller's ``X-Request-ID`` when it is sane, otherwise a fresh one (32 hex digits)."""
    return value if _SAFE_ID.match(value) else uuid.uuid4().hex


@contextmanager
def serving(request_id: str) -> Iterator[RequestScope]:
    """The scope of one request: every line written inside carries ``request_id``."""
    scope = RequestScope(request_id)
    tokens = (request_id_var.set(request_id), _request.set(scope))
    try:
        yield scope
    finally:
        _request.reset(tokens[1])
        request_id_var.reset(tokens[0])


def current_request() -> RequestScope | None:
    return _request.get()


def note_problem(code: str) -> None:
    """The request being served answers with the problem ``code`` (its access line shows it)."""
    scope = _request.get()
    if scope is not None:
        scope.problem_code = code


def current_work() -> WorkIds:
    return _work.get()


@contextmanager
def bound_work(session_id: str | None, turn_id: str | None = None) -> Iterator[None]:
    """Lines written inside carry ``session_id`` and ``turn_id`` (this task and the tasks it
    starts)."""
    token = _work.set(WorkIds(session_id, turn_id))
    try:
        yield
    finally:
        _work.reset(token)
