"""Provider encodings: the prepared request as the exact JSON body a protocol expects.

Pure functions (no I/O, no clock): encoding happens after assembly, adds no context, and the
same request always gives the same body.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from app.core.caching.breakpoints import CachePlan
from app.providers.encoding.anthropic_messages import ANTHROPIC_DRIVER, encode_anthropic_messages
from app.providers.encoding.openai_chat import encode_openai_chat
from app.providers.encoding.openai_responses import RESPONSES_DRIVER, encode_openai_responses

__all__ = [
    "ANTHROPIC_DRIVER",
    "PROTOCOLS",
    "RESPONSES_DRIVER",
    "Protocol",
    "encode",
    "encode_anthropic_messages",
    "encode_openai_chat",
    "encode_openai_responses",
]

Protocol: TypeAlias = Literal["openai_chat", "anthropic_messages", "openai_responses"]
PROTOCOLS: tuple[Protocol, ...] = ("openai_chat", "anthropic_messages", "openai_responses")


def encode(
    request: Mapping[str, Any],
    protocol: Protocol,
    *,
    model: str | None = None,
    stream: bool = False,
    caching: CachePlan | None = None,
    reasoning: bool = False,
) -> dict[str, Any]:
    """Encode ``request`` for ``protocol`` with the breakpoints of ``caching`` (``None``: none);
    ``reasoning``: the model reasons (only the Responses body differs: it asks for the reasoning
    state back). An unknown protocol is a ``ValueError``."""
    if protocol == "openai_chat":
        return encode_openai_chat(request, model=model, stream=stream, caching=caching)
    if protocol == "anthropic_messages":
        return encode_anthropic_messages(request, model=model, stream=stream, caching=caching)
    if protocol == "openai_responses":
        return encode_openai_responses(
            request, model=model, stream=stream, caching=caching, reasoning=reasoning
        )
    raise ValueError(f"unknown provider protocol {protocol!r}")
