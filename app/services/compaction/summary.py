"""Summary attempts against a model (spec §7.4).

The same request up to ``RetryPolicy.attempts`` times, each bounded by its own timeout, with a
pause between attempts (never after the last). Every answer is validated; a contract breach is
the ``degenerate`` class and is retried like a transient error. The failure of every attempt is
kept (with the degenerate answer's text, cut) so a failed compaction can be diagnosed from its
error alone.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import anyio

from app.core.capabilities import SUMMARY_MAX_OUTPUT_TOKENS
from app.core.compaction import (
    AttemptFailure,
    RetryPolicy,
    SummaryInvalid,
    classify_provider_error,
    summary_failure_error,
    validate_summary,
)
from app.core.errors import ServiceError
from app.core.limits.messages import MAX_POSTED_SUMMARY_CHARS
from app.core.pipeline.prepared_call import PreparedModelCall
from app.providers.base import ModelClient, Usage

__all__ = ["GeneratedSummary", "generate_summary"]

log = logging.getLogger(__name__)

# Enough of a rejected answer to see what went wrong, without bloating the error response.
MAX_REJECTED_TEXT_CHARS = 4_000


@dataclass(frozen=True, slots=True)
class GeneratedSummary:
    summary: str
    usage: Usage
    attempts: int
    elapsed_ms: int
    failures: list[dict[str, Any]] = field(default_factory=list)


async def generate_summary(
    client: ModelClient, prepared: PreparedModelCall, policy: RetryPolicy
) -> GeneratedSummary:
    """A validated summary of the summary request ``prepared``, or the ``ServiceError`` of
    ``summary_failure_error``. The client gets the request's items too (their stored origin and
    kind: what the offline ``local`` kind reads a previous summary and reminder from)."""
    started = time.perf_counter()
    failures: list[AttemptFailure] = []
    diagnostics: list[dict[str, Any]] = []
    attempt = 0
    while True:
        attempt += 1
        rejected_text: str | None = None
        try:
            with anyio.fail_after(policy.attempt_timeout_seconds):
                response = await client.complete(prepared.request, conversation=prepared.items)
            rejected_text = response.text
            _check_length(response.text)
            summary = validate_summary(
                response.text,
                finish_reason=response.finish_reason,
                has_tool_calls=bool(response.tool_calls),
            )
            return GeneratedSummary(
                summary=summary,
                usage=response.usage,
                attempts=attempt,
                elapsed_ms=_ms_since(started),
                failures=diagnostics,
            )
        except TimeoutError:
            seconds = policy.attempt_timeout_seconds
            failure = AttemptFailure(
                "timeout", f"compaction summary attempt timed out after {seconds:g} seconds"
            )
        except SummaryInvalid as exc:
            failure = AttemptFailure("degenerate", exc.reason)
        except ServiceError as exc:  # ProviderError and anything a client raises as ours
            failure = AttemptFailure(classify_provider_error(exc.code), f"{exc.code}: {exc.detail}")
            rejected_text = None
        failures.append(failure)
        diagnostics.append(
            {
                "attempt": attempt,
                "classification": failure.classification,
                "reason": failure.reason,
                "response_text": None
                if rejected_text is None
                else rejected_text[:MAX_REJECTED_TEXT_CHARS],
            }
        )
        log.warning(
            "compaction summary attempt failed",
            extra={"fields": {"attempt": attempt, "classification": failure.classification}},
        )
        if not policy.should_retry(attempt, failure.classification):
            error = summary_failure_error(failures)
            error.extra["attempt_errors"] = diagnostics
            raise error
        await anyio.sleep(policy.delay_seconds)


def _check_length(text: str) -> None:
    """A summary longer than the summary request's output limit lets any model write is a
    broken answer (the checkpoint would store it and every later request carry it): a
    degenerate attempt. The same bound as a caller's own summary (``CompactBody.summary``)."""
    if len(text) > MAX_POSTED_SUMMARY_CHARS:
        raise SummaryInvalid(
            f"the summary is {len(text)} characters, more than the {MAX_POSTED_SUMMARY_CHARS} "
            f"its output limit of {SUMMARY_MAX_OUTPUT_TOKENS} tokens allows"
        )


def _ms_since(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)
