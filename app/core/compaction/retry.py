"""Summary attempts: failure classes, the retry policy and the final error (spec §7.4).

The service owns the clock and the sleeping; this module only decides. Policy: the same request
up to ``attempts`` times, each limited to ``attempt_timeout_seconds``, ``delay_seconds`` apart
(never after the last). Failures that another identical attempt cannot fix stop at once:

=================  =====================================  ========
class              cause                                  decision
=================  =====================================  ========
``degenerate``     the answer broke the contract (§7.4)   retry
``timeout``        the attempt or the provider timed out  retry
``transient``      rate limited, server error, unknown    retry
``input_overflow`` the summary request overflows          stop
``deterministic``  authentication, protocol error         stop
=================  =====================================  ========

Final error codes (decision, documented in the report and here):

- every attempt used → ``summary_retries_exhausted`` (502), as spec §7.4 names it;
- stopped early by ``input_overflow`` → ``summary_input_overflow`` (413): the Conversation does
  not fit the summary model; a larger summary model or a rewind is what helps;
- stopped early by ``deterministic`` → ``summary_model_error`` (502): fix the model settings.

Every final error carries ``attempts``, ``classification`` and ``last_error`` as extras. In a turn
the runner reports any of them as the turn outcome ``compaction_error``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from app.core.errors import InvalidInput, ServiceError, TooLarge, UpstreamError

__all__ = [
    "AttemptFailure",
    "FailureClass",
    "RetryPolicy",
    "classify_provider_error",
    "summary_failure_error",
]

FailureClass = Literal["degenerate", "timeout", "input_overflow", "deterministic", "transient"]

_STOPPING: frozenset[FailureClass] = frozenset({"input_overflow", "deterministic"})

_BY_PROVIDER_CODE: Final[dict[str, FailureClass]] = {
    "context_overflow": "input_overflow",
    "timeout": "timeout",
    "rate_limited": "transient",
    "server_error": "transient",
    "auth": "deterministic",
    "protocol": "deterministic",
    # Any other 4xx (unknown model, malformed request, an exhausted script): asking again
    # sends the same request and gets the same answer.
    "bad_request": "deterministic",
    "invalid_summary": "degenerate",
    "invalid_output": "degenerate",
    "degenerate": "degenerate",
}


def classify_provider_error(code: str) -> FailureClass:
    """The failure class of a provider error code; unknown codes are ``transient``.

    Unknown errors are retried (as the original runtime did): a retry costs one more call,
    while giving up on a recoverable error costs the whole compaction.
    """
    return _BY_PROVIDER_CODE.get(code, "transient")


@dataclass(frozen=True, slots=True)
class AttemptFailure:
    """One failed summary attempt, for the decision and for the final error."""

    classification: FailureClass
    reason: str


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 3
    attempt_timeout_seconds: float = 120.0
    delay_seconds: float = 3.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise InvalidInput("invalid_retry_policy", "attempts must be at least 1")
        if self.attempt_timeout_seconds <= 0:
            raise InvalidInput("invalid_retry_policy", "attempt_timeout_seconds must be positive")
        if self.delay_seconds < 0:
            raise InvalidInput("invalid_retry_policy", "delay_seconds must not be negative")

    def should_retry(self, attempt: int, failure: FailureClass) -> bool:
        """After failed attempt number ``attempt`` (1-based): try again?"""
        return failure not in _STOPPING and attempt < self.attempts


def summary_failure_error(failures: Sequence[AttemptFailure]) -> ServiceError:
    """The error to raise once the policy says stop; ``failures`` in attempt order."""
    if not failures:
        raise ValueError("summary_failure_error needs at least one failure")
    last = failures[-1]
    extra = {
        "attempts": len(failures),
        "classification": last.classification,
        "last_error": last.reason,
    }
    if last.classification == "input_overflow":
        return TooLarge(
            "summary_input_overflow",
            "the Conversation is too large for the summary model's context window "
            f"({last.reason}); use a summary model with a larger window or rewind to an earlier "
            "checkpoint",
            **extra,
        )
    if last.classification == "deterministic":
        return UpstreamError(
            "summary_model_error",
            f"the summary model refused the request ({last.reason}); retrying cannot help, "
            "check the summary model's provider settings",
            **extra,
        )
    return UpstreamError(
        "summary_retries_exhausted",
        f"compaction summary failed after {len(failures)} attempts: {last.reason}; nothing "
        "was changed, try again later or use another summary model",
        **extra,
    )
