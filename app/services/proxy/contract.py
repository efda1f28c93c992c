"""What a compatible endpoint's codec hands the proxy service, and what it gets back.

A codec (``app.api.compat``) reads one provider protocol's request body into a ``ProxyRequest``
in the service's content model, and writes the answer back in that protocol: a whole body, a
stream of server-sent events, or an error object. The proxy service (``app.services.proxy``)
never sees a provider's wire shape, and a codec never sees a session.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias

from app.core.content import Block
from app.core.pipeline.prepared_call import Budget, ToolDefinition
from app.providers.base import ModelResponse
from app.providers.encoding.sampling import Sampling

__all__ = [
    "AnswerEvent",
    "Codec",
    "CompatProtocol",
    "Completed",
    "ProxyMessage",
    "ProxyOutcome",
    "ProxyRequest",
    "ReasoningDelta",
    "TextDelta",
]

CompatProtocol: TypeAlias = Literal["openai_chat", "anthropic_messages", "openai_responses"]


@dataclass(frozen=True, slots=True)
class ProxyMessage:
    """One message of the history the caller sent, as the content model holds it (spec §1)."""

    role: Literal["user", "assistant", "tool"]
    content: list[Block]


@dataclass(frozen=True, slots=True)
class ProxyRequest:
    """A caller's whole request: the history it keeps (the SDK resends all of it each call)."""

    protocol: CompatProtocol
    model: str
    # The caller's system prompt (system / developer messages, ``system``, ``instructions``),
    # joined in order; ``None`` when the request has none.
    system: str | None
    messages: list[ProxyMessage]
    tools: list[ToolDefinition]
    stream: bool
    max_output_tokens: int | None = None
    # Other request fields the caller set (temperature, top_p, tool_choice, stop, metadata ...),
    # kept verbatim by name.
    params: dict[str, Any] = field(default_factory=dict)
    # The sampling fields of ``params``, checked (``app.api.compat._sampling``): forwarded to
    # the provider in its protocol, never part of which session the request continues.
    sampling: Sampling = field(default_factory=Sampling)


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class Completed:
    """The provider's completed answer; always the last event of a stream that succeeded."""

    response: ModelResponse


AnswerEvent: TypeAlias = TextDelta | ReasoningDelta | Completed


@dataclass(frozen=True, slots=True)
class ProxyOutcome:
    """What happened to the session, told to the caller in response headers."""

    session_id: str
    budget: Budget
    compacted: bool
    # The session this one was forked from when the caller's history differed from it.
    forked_from: str | None = None


class Codec(Protocol):
    """One provider protocol's request and answer shapes."""

    @property
    def protocol(self) -> CompatProtocol:
        """Which protocol: read-only, so a codec may declare its own literal (a plain attribute
        of type ``Literal["openai_chat"]``, say) and still be a ``Codec``."""
        ...

    def decode(self, body: Mapping[str, Any]) -> ProxyRequest:
        """The request, or ``InvalidInput`` (``app.core.errors``) with a stable code naming the
        field, before anything is stored."""
        ...

    def render(self, response: ModelResponse, *, model: str, response_id: str) -> dict[str, Any]:
        """The whole (non-streamed) answer body, as the provider would send it."""
        ...

    def render_stream(
        self, events: AsyncIterator[AnswerEvent], *, model: str, response_id: str
    ) -> AsyncIterator[bytes]:
        """The answer as the provider's server-sent events, ending the way its SDK expects.
        An exception raised by ``events`` becomes the protocol's in-stream error event."""
        ...

    def render_error(self, status: int, code: str, message: str) -> dict[str, Any]:
        """An error body in the protocol's own shape (what its SDK reads into its exception)."""
        ...
