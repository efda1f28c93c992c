"""What an adapter tells the caller about one ``complete()`` beyond its answer: how many attempts
it made, which errors it retried, and when the answering attempt's first body bytes arrived.

The caller that wants them (the model-call observer, ``app.observability.model_calls``) opens a
``CallStats`` with ``collecting()`` before the call and closes it with ``stop_collecting()``
after; the adapters report into whatever is open for the current task (``note_*``), and report
nothing when none is. A context variable rather than a parameter: ``ModelClient.complete`` keeps
its signature, and clients that do not stream (the offline kinds) simply leave the defaults (one
attempt, no first byte).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from dataclasses import dataclass, field

__all__ = [
    "CallStats",
    "collecting",
    "note_attempt",
    "note_first_byte",
    "note_retry",
    "note_sent",
    "stop_collecting",
    "stop_watching_sent",
    "watch_sent",
]


@dataclass(slots=True)
class CallStats:
    attempts: int = 1
    # ``ProviderError.code`` of each failed attempt that was retried, in order.
    retried: list[str] = field(default_factory=list)
    # ``time.perf_counter()`` when the latest attempt was sent and its first body bytes came.
    attempt_started_at: float | None = None
    first_byte_at: float | None = None

    @property
    def first_byte_seconds(self) -> float | None:
        """From sending the latest attempt to its first body bytes (``None``: none arrived)."""
        if self.attempt_started_at is None or self.first_byte_at is None:
            return None
        return self.first_byte_at - self.attempt_started_at


_current: contextvars.ContextVar[CallStats | None] = contextvars.ContextVar(
    "ctxsvc_call_stats", default=None
)


def collecting() -> tuple[CallStats, contextvars.Token[CallStats | None]]:
    """Collect the adapter's reports for the calls this task makes until ``stop_collecting``
    (with the token returned here; a plain pair, not a context manager: it is on every model
    call's path)."""
    stats = CallStats()
    return stats, _current.set(stats)


def stop_collecting(token: contextvars.Token[CallStats | None]) -> None:
    _current.reset(token)


def note_attempt(attempt: int) -> None:
    """Attempt number ``attempt`` (1-based) is being sent now."""
    stats = _current.get()
    if stats is not None:
        stats.attempts = attempt
        stats.attempt_started_at = time.perf_counter()
        stats.first_byte_at = None


def note_first_byte() -> None:
    stats = _current.get()
    if stats is not None and stats.first_byte_at is None:
        stats.first_byte_at = time.perf_counter()


def note_retry(code: str) -> None:
    """The attempt just made failed with ``code`` and will be retried."""
    stats = _current.get()
    if stats is not None:
        stats.retried.append(code)


# Set by a caller that has work to do once the request is on its way (``watch_sent``).
_sent: contextvars.ContextVar[asyncio.Event | None] = contextvars.ContextVar(
    "ctxsvc_request_sent", default=None
)


def watch_sent(event: asyncio.Event) -> contextvars.Token[asyncio.Event | None]:
    """Calls started from this context (tasks copy it) set ``event`` once their request is
    written (``note_sent``); reset with the token when no longer wanted."""
    return _sent.set(event)


def note_sent() -> None:
    """The request is written to the connection (or will not be: the caller should go on with
    its own work now rather than wait, e.g. a new connection must be opened first)."""
    event = _sent.get()
    if event is not None:
        event.set()


def stop_watching_sent(token: contextvars.Token[asyncio.Event | None]) -> None:
    _sent.reset(token)
