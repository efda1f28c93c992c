"""What every model provider adapter takes, returns and raises.

An adapter (``ModelClient``) receives the provider-independent prepared request, encodes it for
its protocol, streams the answer over the process's one HTTP session
(``app.providers.http_client.ProviderHTTP``) and returns a
``ModelResponse``. Text and reasoning deltas go to an optional ``StreamSink`` as they arrive.
Failures are ``ProviderError``s whose ``code`` is one of::

    context_overflow   the provider said the input does not fit the model's window
    rate_limited       429 (retried while nothing semantic was received)
    auth               missing API key variable, 401 or 403 (never retried)
    timeout            no first byte in time, an idle stream, or the call's total budget spent
    server_error       5xx / 529 / dropped connection (retried while nothing semantic arrived)
    protocol           a malformed stream or one that ended without a completed response
    bad_request        any other 4xx: the provider refused the request itself; or the request
                       cannot be made as configured (a base_url or proxy that does not parse):
                       never retried

Only adapters read provider error bodies; the rest of the service looks at ``code`` and
``semantic_output_received`` (an overflow is only safe to compact and resubmit when no text,
reasoning or tool call had arrived yet).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol, TypeAlias

from app.core.caching.breakpoints import CachePlan
from app.core.content import Block, Item, ProviderOpaqueBlock, ToolCallBlock
from app.core.errors import ErrorKind, UpstreamError

__all__ = [
    "MAX_REPORTED_TOKENS",
    "FinishReason",
    "KeyProblem",
    "ModelClient",
    "ModelResponse",
    "ProviderConfig",
    "ProviderError",
    "ProviderErrorCode",
    "ProviderKind",
    "RetryPolicy",
    "StreamSink",
    "Timeouts",
    "Usage",
    "api_key_problem",
]

logger = logging.getLogger(__name__)

ProviderKind: TypeAlias = Literal[
    "openai_chat", "anthropic_messages", "openai_responses", "scripted", "local"
]
FinishReason: TypeAlias = Literal["stop", "tool_calls", "length", "content_filter", "other"]
ProviderErrorCode: TypeAlias = Literal[
    "context_overflow", "rate_limited", "auth", "timeout", "server_error", "protocol", "bad_request"
]


@dataclass(frozen=True, slots=True)
class ProviderConfig:
    """Where a model lives. The key itself is read from the environment variable
    ``api_key_env`` at call time, never stored here and never taken from a request body."""

    kind: ProviderKind
    base_url: str
    model_name: str
    # None: the server needs no key (a local Ollama, vLLM or llama.cpp): no auth header is sent.
    api_key_env: str | None = None
    # The model reasons (``ModelCapabilities.reasoning``): its Responses requests ask for the
    # reasoning state back.
    reasoning: bool = False


# Why a model's key cannot be used (``api_key_problem``): a stable code, as readiness shows it.
KeyProblem: TypeAlias = Literal["api_key_missing", "api_key_invalid"]


def api_key_problem(
    api_key_env: str | None, env: Mapping[str, str]
) -> tuple[KeyProblem, str] | None:
    """Why a model whose key lives in ``api_key_env`` cannot be called: a code and a sentence
    that never shows the key (``None`` when it can: the variable holds a usable key, or the model
    needs none). A key is sent in a header, where a control character (a line break pasted with
    it) is refused by the HTTP client before anything is sent."""
    if api_key_env is None:
        return None
    key = env.get(api_key_env, "").strip()
    if not key:
        return "api_key_missing", (
            f"the environment variable {api_key_env} named by api_key_env is not set in the "
            "service's environment; export it where ctxsvc runs and restart, or remove "
            "api_key_env if the server needs no key"
        )
    if any(ch < " " or ch == "\x7f" for ch in key):
        return "api_key_invalid", (
            f"the environment variable {api_key_env} named by api_key_env holds a control "
            "character (a line break, say) inside the key, which no HTTP header can carry; set "
            "it to the key alone where ctxsvc runs and restart"
        )
    return None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff for 429 / 5xx / connection failures before any semantic output.

    ``max_attempts`` counts the first try. A ``Retry-After`` header replaces the computed delay;
    one longer than ``max_retry_after`` (or past the call's total budget) ends the call instead.
    """

    max_attempts: int = 3
    initial_delay: float = 0.5
    multiplier: float = 2.0
    max_delay: float = 8.0
    max_retry_after: float = 60.0

    def delay(self, attempt: int) -> float:
        """The pause after failed attempt number ``attempt`` (1-based)."""
        return float(min(self.max_delay, self.initial_delay * self.multiplier ** (attempt - 1)))


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds. ``first_byte``: from sending until the first body bytes; ``idle``: longest gap
    between stream chunks; ``total``: the whole ``complete()`` call, retries included."""

    connect: float = 10.0
    first_byte: float = 60.0
    idle: float = 60.0
    total: float = 600.0


MAX_REPORTED_TOKENS = 2**31 - 1
"""The largest token figure kept from a provider's report: what every column that stores one
(PostgreSQL ``integer``) holds. Providers have reported nonsense (≥ 2³¹ input tokens); such a
figure is clamped to this, and a negative one to 0, with a warning: a number a provider reports
never fails a turn."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token figures as the provider reported them; ``None`` where it reported nothing.

    ``input_tokens`` is the whole prompt, cached part included (comparable with our estimate):
    ``cached_tokens`` of it were read from the provider's prompt cache and
    ``cache_creation_tokens`` written to it (Anthropic bills writes apart; OpenAI reports none).
    Every figure is an ``int`` within ``0..MAX_REPORTED_TOKENS`` once built: anything else a
    provider (or a stored script) reports is clamped or, when it is no integer, dropped.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    cache_creation_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in (
            "input_tokens",
            "output_tokens",
            "cached_tokens",
            "reasoning_tokens",
            "cache_creation_tokens",
        ):
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                logger.warning("provider reported %s=%.40r: not an integer, ignored", name, value)
                bounded = None
            elif 0 <= value <= MAX_REPORTED_TOKENS:
                continue
            else:
                bounded = min(max(value, 0), MAX_REPORTED_TOKENS)
                logger.warning(
                    "provider reported %s=%.40s: out of range, clamped to %d", name, value, bounded
                )
            object.__setattr__(self, name, bounded)


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """A completed response. Tool calls come only from a completed stream, never from deltas."""

    text: str = ""
    thinking: str = ""
    provider_opaque: list[ProviderOpaqueBlock] = field(default_factory=list)
    tool_calls: list[ToolCallBlock] = field(default_factory=list)
    finish_reason: FinishReason = "stop"
    usage: Usage = field(default_factory=Usage)
    # The provider's own word, for diagnostics (e.g. ``end_turn``, ``max_tokens``).
    raw_finish_reason: str | None = None

    def assistant_content(self) -> list[Block]:
        """The assistant message blocks in spec §1 order: thinking, text, opaque, tool calls."""
        blocks: list[Block] = []
        if self.thinking:
            blocks.append({"type": "thinking", "thinking": self.thinking})
        if self.text:
            blocks.append({"type": "text", "text": self.text})
        blocks.extend(self.provider_opaque)
        blocks.extend(self.tool_calls)
        return blocks


class StreamSink(Protocol):
    """Receives live output while a response streams (deltas are never stored)."""

    async def on_text_delta(self, text: str) -> None: ...

    async def on_reasoning_delta(self, text: str) -> None: ...

    async def on_draft_cleared(self) -> None:
        """An attempt failed after deltas were delivered: discard the draft shown so far."""
        ...


class ModelClient(Protocol):
    async def complete(
        self,
        request: dict[str, Any],
        *,
        sink: StreamSink | None = None,
        caching: CachePlan | None = None,
        conversation: Sequence[Item] | None = None,
    ) -> ModelResponse:
        """Run one model call for a prepared request, with the cache breakpoints of
        ``caching`` (``None``: none; the offline kinds ignore it); raises ``ProviderError``.

        ``conversation`` is the items the request was assembled from
        (``PreparedModelCall.items``), with their stored origin and kind: the offline ``local``
        kind reads what each message *is* from them, never from its text (a user pasting a
        summary is still the user, spec §1). HTTP adapters send ``request`` only."""
        ...


class ProviderError(UpstreamError):
    """A provider call failed; ``code`` is a ``ProviderErrorCode`` (see the module docstring).

    Build one with ``ProviderError.of(...)``, which picks the subclass whose ``kind`` fits the
    HTTP family (429 for ``rate_limited``, 504 for ``timeout``, 502 otherwise).
    """

    code: ProviderErrorCode

    def __init__(
        self,
        code: ProviderErrorCode,
        detail: str,
        *,
        semantic_output_received: bool = False,
        retryable: bool = False,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(code, detail, semantic_output_received=semantic_output_received)
        self.code = code
        self.semantic_output_received = semantic_output_received
        # Internal to the adapters: whether a fresh attempt may help, and how long to wait.
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status

    @classmethod
    def of(
        cls,
        code: ProviderErrorCode,
        detail: str,
        *,
        semantic_output_received: bool = False,
        retryable: bool = False,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> ProviderError:
        kind: type[ProviderError] = {
            "rate_limited": ProviderRateLimited,
            "timeout": ProviderTimeout,
        }.get(code, ProviderError)
        return kind(
            code,
            detail,
            semantic_output_received=semantic_output_received,
            retryable=retryable,
            retry_after=retry_after,
            status=status,
        )


class ProviderRateLimited(ProviderError):
    kind: ClassVar[ErrorKind] = "rate_limited"


class ProviderTimeout(ProviderError):
    kind: ClassVar[ErrorKind] = "timeout"
