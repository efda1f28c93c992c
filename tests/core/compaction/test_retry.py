from __future__ import annotations

import pytest

from app.core.compaction.retry import (
    AttemptFailure,
    FailureClass,
    RetryPolicy,
    classify_provider_error,
    summary_failure_error,
)
from app.core.errors import InvalidInput, TooLarge, UpstreamError


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("context_overflow", "input_overflow"),
        ("timeout", "timeout"),
        ("rate_limited", "transient"),
        ("server_error", "transient"),
        ("auth", "deterministic"),
        ("protocol", "deterministic"),
        ("invalid_summary", "degenerate"),
        ("something_new", "transient"),
    ],
)
def test_classification(code: str, expected: FailureClass) -> None:
    assert classify_provider_error(code) == expected


def test_defaults_are_three_attempts_120_seconds_3_apart() -> None:
    policy = RetryPolicy()
    assert (policy.attempts, policy.attempt_timeout_seconds, policy.delay_seconds) == (
        3,
        120.0,
        3.0,
    )


@pytest.mark.parametrize("failure", ["degenerate", "timeout", "transient"])
def test_retryable_failures_retry_until_the_last_attempt(failure: FailureClass) -> None:
    policy = RetryPolicy()
    assert policy.should_retry(1, failure)
    assert policy.should_retry(2, failure)
    assert not policy.should_retry(3, failure)


@pytest.mark.parametrize("failure", ["input_overflow", "deterministic"])
def test_stopping_failures_stop_at_once(failure: FailureClass) -> None:
    assert not RetryPolicy().should_retry(1, failure)


def test_policy_is_overridable_and_validated() -> None:
    policy = RetryPolicy(attempts=5, attempt_timeout_seconds=1.5, delay_seconds=0)
    assert policy.should_retry(4, "timeout")
    assert not policy.should_retry(5, "timeout")
    for bad in ({"attempts": 0}, {"attempt_timeout_seconds": 0}, {"delay_seconds": -1}):
        with pytest.raises(InvalidInput) as info:
            RetryPolicy(**bad)  # type: ignore[arg-type]
        assert info.value.code == "invalid_retry_policy"


def test_exhausted_retries() -> None:
    failures = [
        AttemptFailure("degenerate", "missing conversation_summary root"),
        AttemptFailure("timeout", "attempt timed out after 120 seconds"),
        AttemptFailure("degenerate", "finish reason was length"),
    ]
    error = summary_failure_error(failures)
    assert isinstance(error, UpstreamError)
    assert error.code == "summary_retries_exhausted"
    assert error.extra == {
        "attempts": 3,
        "classification": "degenerate",
        "last_error": "finish reason was length",
    }
    assert "after 3 attempts: finish reason was length" in error.detail


def test_input_overflow_stops_with_its_own_code() -> None:
    error = summary_failure_error([AttemptFailure("input_overflow", "context_overflow")])
    assert isinstance(error, TooLarge)
    assert error.code == "summary_input_overflow"
    assert error.extra["attempts"] == 1


def test_deterministic_stops_with_its_own_code() -> None:
    error = summary_failure_error([AttemptFailure("deterministic", "auth")])
    assert isinstance(error, UpstreamError)
    assert error.code == "summary_model_error"


def test_no_failure_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="at least one failure"):
        summary_failure_error([])
