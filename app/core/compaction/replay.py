"""Read-only replay of a projection (spec §7.7).

Selectors: ``latest`` (the current projection), ``compaction:{id}`` (that checkpoint's three
synthetic items) and ``through_message:{n}`` (the latest checkpoint installed at or before
message ``n``, plus the raw messages up to ``n``). Replay reads; it never writes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

from app.core.chat_rules import MAX_SEQUENCE
from app.core.compaction.checkpoint import Checkpoint, compacted_projection
from app.core.content import Item
from app.core.errors import InvalidInput

__all__ = [
    "CompactionSelector",
    "LatestSelector",
    "ReplaySelector",
    "ThroughMessageSelector",
    "checkpoint_installed_through",
    "parse_replay_selector",
    "replay_through_message",
]


@dataclass(frozen=True, slots=True)
class LatestSelector:
    pass


@dataclass(frozen=True, slots=True)
class CompactionSelector:
    compaction_id: str


@dataclass(frozen=True, slots=True)
class ThroughMessageSelector:
    sequence: int


ReplaySelector: TypeAlias = LatestSelector | CompactionSelector | ThroughMessageSelector

_DIGITS = re.compile(r"[0-9]+", re.ASCII)


def _invalid(selector: str) -> InvalidInput:
    return InvalidInput(
        "invalid_selector",
        f"replay selector {selector!r} is not one of latest, compaction:{{id}} or "
        f"through_message:{{n}} (n an integer from 0 to {MAX_SEQUENCE})",
        selector=selector,
    )


def parse_replay_selector(selector: str) -> ReplaySelector:
    """Parse a selector; anything else raises ``InvalidInput`` ``invalid_selector``."""
    if selector == "latest":
        return LatestSelector()
    prefix, sep, rest = selector.partition(":")
    if not sep:
        raise _invalid(selector)
    if prefix == "compaction" and rest and rest == rest.strip():
        return CompactionSelector(rest)
    # Digits only: no sign, no spaces, no underscores (``int()`` would accept all three).
    # Bounded because the sequence reaches the database, whose integers stop at MAX_SEQUENCE.
    if prefix == "through_message" and _DIGITS.fullmatch(rest) and int(rest) <= MAX_SEQUENCE:
        return ThroughMessageSelector(int(rest))
    raise _invalid(selector)


def checkpoint_installed_through(
    checkpoints: Sequence[Checkpoint], sequence: int
) -> Checkpoint | None:
    """The latest checkpoint whose install boundary is ≤ ``sequence`` (ties: newest row)."""
    eligible = [c for c in checkpoints if c.replaced_through_message_sequence <= sequence]
    if not eligible:
        return None
    return max(eligible, key=lambda c: (c.replaced_through_message_sequence, c.sequence))


def replay_through_message(
    checkpoints: Sequence[Checkpoint], messages: Sequence[Item], sequence: int
) -> list[Item]:
    """The projection as it stood right after message ``sequence``.

    ``checkpoints``: the session's checkpoints (each with its replay content); ``messages``:
    stored rows (at least those up to ``sequence``). Without a checkpoint installed by then,
    the raw messages ``1..sequence``.
    """
    chosen = checkpoint_installed_through(checkpoints, sequence)
    floor = chosen.replaced_through_message_sequence if chosen is not None else 0
    raw = sorted(
        (m for m in messages if m.sequence is not None and floor < m.sequence <= sequence),
        key=lambda m: m.sequence or 0,
    )
    return compacted_projection(chosen, raw) if chosen is not None else raw
