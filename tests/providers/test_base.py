from __future__ import annotations

import pytest

from app.core.errors import ServiceError
from app.providers.base import (
    MAX_REPORTED_TOKENS,
    ModelResponse,
    ProviderError,
    RetryPolicy,
    Usage,
)


def test_assistant_content_follows_spec_order_and_skips_empty_parts() -> None:
    response = ModelResponse(
        text="answer",
        thinking="why",
        provider_opaque=[
            {"type": "provider_opaque", "driver": "anthropic", "kind": "thinking", "payload": {}}
        ],
        tool_calls=[{"type": "tool_call", "id": "c1", "name": "read", "input": "{}"}],
    )
    assert [b["type"] for b in response.assistant_content()] == [
        "thinking",
        "text",
        "provider_opaque",
        "tool_call",
    ]
    assert ModelResponse(text="", thinking="").assistant_content() == []


def test_usage_defaults_to_unknown() -> None:
    assert Usage() == Usage(None, None, None, None)


def test_reported_usage_is_kept_within_what_the_store_holds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    at_cap = Usage(MAX_REPORTED_TOKENS, 0, 5, None)
    assert at_cap == Usage(2**31 - 1, 0, 5, None)
    assert caplog.text == ""
    clamped = Usage(MAX_REPORTED_TOKENS + 1, -1, True, "7")  # type: ignore[arg-type]
    assert clamped == Usage(MAX_REPORTED_TOKENS, 0, None, None)
    assert "input_tokens=2147483648: out of range, clamped to 2147483647" in caplog.text
    assert "cached_tokens=True: not an integer, ignored" in caplog.text


def test_cache_creation_tokens_are_kept_within_range_too(caplog: pytest.LogCaptureFixture) -> None:
    assert Usage(cache_creation_tokens=MAX_REPORTED_TOKENS + 5).cache_creation_tokens == (
        MAX_REPORTED_TOKENS
    )
    assert Usage(cache_creation_tokens=-3).cache_creation_tokens == 0
    assert Usage(cache_creation_tokens="9").cache_creation_tokens is None  # type: ignore[arg-type]
    assert "cache_creation_tokens=-3: out of range, clamped to 0" in caplog.text


def test_backoff_grows_and_is_capped() -> None:
    policy = RetryPolicy(initial_delay=0.5, multiplier=2, max_delay=3)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("rate_limited", "rate_limited"),
        ("timeout", "timeout"),
        ("server_error", "upstream"),
        ("context_overflow", "upstream"),
        ("auth", "upstream"),
    ],
)
def test_error_kind_fits_the_http_family(code: str, kind: str) -> None:
    error = ProviderError.of(code, "x", semantic_output_received=True)  # type: ignore[arg-type]
    assert isinstance(error, ServiceError)
    assert (error.code, error.kind, error.semantic_output_received) == (code, kind, True)
    assert error.extra == {"semantic_output_received": True}


def test_factory_picks_the_adapter_by_kind() -> None:
    from app.providers.anthropic_messages import AnthropicMessagesClient
    from app.providers.base import ProviderConfig
    from app.providers.factory import http_model_client
    from app.providers.http_client import ProviderHTTP
    from app.providers.openai_chat import OpenAIChatClient

    # Nothing is sent, so no session is ever made (and none needs closing).
    http = ProviderHTTP(allow_private_hosts=True)
    openai = http_model_client(http, ProviderConfig("openai_chat", "http://x", "m"), env={})
    anthropic = http_model_client(
        http, ProviderConfig("anthropic_messages", "http://x", "m"), env={}
    )
    assert isinstance(openai, OpenAIChatClient)
    assert isinstance(anthropic, AnthropicMessagesClient)
    with pytest.raises(ValueError, match="scripted"):
        http_model_client(http, ProviderConfig("scripted", "", "m"), env={})
