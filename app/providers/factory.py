"""Build the HTTP ``ModelClient`` for a provider config (the composition root calls this)."""

from __future__ import annotations

from collections.abc import Mapping

from app.providers.anthropic_messages import AnthropicMessagesClient
from app.providers.base import ModelClient, ProviderConfig, RetryPolicy, Timeouts
from app.providers.http_client import ProviderHTTP
from app.providers.openai_chat import OpenAIChatClient
from app.providers.openai_responses import OpenAIResponsesClient

__all__ = ["HTTP_PROVIDER_KINDS", "http_model_client"]

HTTP_PROVIDER_KINDS = frozenset({"openai_chat", "anthropic_messages", "openai_responses"})


def http_model_client(
    http: ProviderHTTP,
    config: ProviderConfig,
    *,
    env: Mapping[str, str],
    retry: RetryPolicy | None = None,
    timeouts: Timeouts | None = None,
) -> ModelClient:
    """The adapter for ``config.kind``; offline kinds (``scripted``, ``local``) are not HTTP
    providers and are refused with ``ValueError``."""
    if config.kind == "openai_chat":
        return OpenAIChatClient(http, config, env=env, retry=retry, timeouts=timeouts)
    if config.kind == "anthropic_messages":
        return AnthropicMessagesClient(http, config, env=env, retry=retry, timeouts=timeouts)
    if config.kind == "openai_responses":
        return OpenAIResponsesClient(http, config, env=env, retry=retry, timeouts=timeouts)
    raise ValueError(f"provider kind {config.kind!r} is not an HTTP provider")
