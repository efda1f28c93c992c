"""Token counting seam (spec §3.1, §3.4).

A counter works in two steps so that per-message figures can be cached and summed: ``measure_*``
returns an additive figure for one piece (UTF-8 bytes for the estimate, tokens for an exact
tokenizer, framing included), and ``tokens(total)`` turns a region's summed measure into tokens.
The estimate sums bytes and rounds once per region (``ceil(Σbytes / 4)``), exactly as the original
runtime measured; an exact counter's ``tokens`` is the identity.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Protocol

from app.core.content import Block, compact_json, content_without_artifacts

__all__ = [
    "ESTIMATE",
    "CounterWrapper",
    "EstimateCounter",
    "TokenCounter",
    "estimate_tokens",
    "utf8_len",
]


class TokenCounter(Protocol):
    """What the core needs from a token counter."""

    @property
    def name(self) -> str:
        """Stable name, e.g. ``estimate`` or ``tiktoken:o200k_base``; keys cached measures."""
        ...

    @property
    def request_overhead_tokens(self) -> int:
        """Tokens a provider adds once per request (reply priming); 0 for the estimate."""
        ...

    def measure_content(self, content: Sequence[Block]) -> int:
        """Additive figure of a content list as sent (artifacts never count)."""
        ...

    def measure_message(self, role: str, content: Sequence[Block]) -> int:
        """Additive figure of one message (conversation or system part), with the per-message
        framing if any: ``frame_message(role, measure_content(content))``."""
        ...

    def frame_message(self, role: str, content_measure: int) -> int:
        """``content_measure`` (a ``measure_content`` figure) framed as one message of
        ``role``: every region's messages are framed by this one rule."""
        ...

    def measure_tools(self, tools: Sequence[Any]) -> int:
        """Figure of the whole tool-definition array (0 when empty)."""
        ...

    def tokens(self, total_measure: int) -> int:
        """Tokens of a summed region measure."""
        ...


def utf8_len(text: str) -> int:
    # ASCII fast path: len() is the byte count and avoids allocating the encoded copy.
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def estimate_tokens(byte_count: int) -> int:
    """``ceil(bytes / 4)``: 0→0, 1→1, 4→1, 5→2."""
    return -(-byte_count // 4)


class EstimateCounter:
    """The default counter: bytes of compact JSON / 4, rounded up per region (spec §3.1)."""

    name = "estimate"
    request_overhead_tokens = 0

    def measure_content(self, content: Sequence[Block]) -> int:
        return utf8_len(compact_json(content_without_artifacts(content)))

    def measure_message(self, role: str, content: Sequence[Block]) -> int:
        # Role is not counted (spec §3.1).
        return self.measure_content(content)

    def frame_message(self, role: str, content_measure: int) -> int:
        return content_measure  # spec §3.1 measures content only: no framing

    def measure_tools(self, tools: Sequence[Any]) -> int:
        return utf8_len(compact_json(list(tools))) if tools else 0

    def tokens(self, total_measure: int) -> int:
        return estimate_tokens(total_measure)


ESTIMATE: Final = EstimateCounter()


class CounterWrapper:
    """Forwards every ``TokenCounter`` method to ``inner``; a wrapper overrides what it changes
    (calibration scales ``tokens``, a memo short-cuts ``measure_message``, tests count calls)."""

    __slots__ = ("_inner",)

    def __init__(self, inner: TokenCounter) -> None:
        self._inner = inner

    @property
    def inner(self) -> TokenCounter:
        return self._inner

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def request_overhead_tokens(self) -> int:
        return self._inner.request_overhead_tokens

    def measure_content(self, content: Sequence[Block]) -> int:
        return self._inner.measure_content(content)

    def measure_message(self, role: str, content: Sequence[Block]) -> int:
        return self._inner.measure_message(role, content)

    def frame_message(self, role: str, content_measure: int) -> int:
        return self._inner.frame_message(role, content_measure)

    def measure_tools(self, tools: Sequence[Any]) -> int:
        return self._inner.measure_tools(tools)

    def tokens(self, total_measure: int) -> int:
        return self._inner.tokens(total_measure)
