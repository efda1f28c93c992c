"""Provenance of the Conversation's messages (spec §2.4; spec §19.1).

One entry per message of the prepared Conversation: where it comes from (``persisted``,
``provided`` or ``synthesized`` with a reason) and its share of the budget's
``conversation_tokens``. The share of message *i* is the region figure of the running total of
measures after it minus the figure before it, so the shares add up to the region exactly,
whatever the counter rounds, and a message's share never changes when messages are appended
after it (the region of any prefix is the sum of its shares).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from operator import sub
from typing import Literal, TypeAlias, TypedDict

from app.core.content import Item, RealOrigin, SyntheticReason
from app.core.counting import TokenCounter

__all__ = [
    "PersistedProvenance",
    "Provenance",
    "ProvidedProvenance",
    "SynthesizedProvenance",
    "provenance_of",
    "token_shares",
]


class PersistedProvenance(TypedDict):
    """A stored row (or an item the caller gave a ``message_id``)."""

    type: Literal["persisted"]
    message_id: str
    sequence: int | None
    tokens: int


class SynthesizedProvenance(TypedDict):
    """An item the service made: a compaction projection's, or an interrupted result."""

    type: Literal["synthesized"]
    reason: SyntheticReason
    tokens: int


class ProvidedProvenance(TypedDict):
    """An item the caller supplied without a ``message_id`` (a live item, not stored)."""

    type: Literal["provided"]
    tokens: int


Provenance: TypeAlias = PersistedProvenance | SynthesizedProvenance | ProvidedProvenance


def token_shares(measures: Sequence[int], counter: TokenCounter) -> list[int]:
    """Each message's share of ``conversation_tokens``, from its measure (see the docstring).

    The request's own overhead (an exact counter's reply priming) is in the first share: it is
    there whatever follows, so no later append changes an earlier share. An empty Conversation
    has no share (its region is that overhead alone, 0 for the estimate).
    """
    totals = list(map(counter.tokens, accumulate(measures)))
    if not totals:
        return totals
    shares = [totals[0] + counter.request_overhead_tokens]
    shares += map(sub, totals[1:], totals)
    return shares


def provenance_of(items: Sequence[Item], shares: Sequence[int]) -> list[Provenance]:
    """One entry per Conversation message, with its share of the region (``token_shares``).

    ``persisted``: an origin with a ``message_id``; ``provided``: any other real origin (the
    caller's item without an id); ``synthesized``: an item the service made, with its reason.
    """
    # One comprehension: this runs once per message of a prepare answer.
    return [
        (
            {
                "type": "persisted",
                "message_id": origin.message_id,
                "sequence": origin.sequence,
                "tokens": tokens,
            }
            if origin.message_id is not None
            else {"type": "provided", "tokens": tokens}
        )
        if isinstance(origin := item.origin, RealOrigin)
        else {"type": "synthesized", "reason": origin.reason, "tokens": tokens}
        for item, tokens in zip(items, shares, strict=True)
    ]
