"""Which stored messages a session's active Conversation shows, beyond its checkpoint.

Two operations hide without deleting (stored messages are append-only, spec §5): taking back the
last message (a client's "pop") and starting a new epoch (a client's "clear"). Both change only
this view, kept on the session row; the messages stay stored, readable in the raw message list
and in transcripts, and a rewind (spec §7.7) installs any earlier checkpoint again.

- ``hidden``: the sequences taken back, as sorted, merged ``(first, last)`` ranges (taking back
  the last message again and again adds to one range);
- ``epoch_after``: the last message sequence when the latest epoch started: every message up to
  it is hidden;
- ``epoch_checkpoint``: the sequence of the latest checkpoint when it started: that checkpoint
  and every earlier one no longer project into the Conversation. A checkpoint installed later
  (a compaction of the new epoch, a rewind) does.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["EMPTY_VIEW", "ConversationView", "view_from_json"]


@dataclass(frozen=True, slots=True)
class ConversationView:
    hidden: tuple[tuple[int, int], ...] = ()
    epoch_after: int = 0
    epoch_checkpoint: int = 0

    def shows(self, sequence: int) -> bool:
        if sequence <= self.epoch_after:
            return False
        # The range holding ``sequence``, if any, starts at or just before it.
        at = bisect.bisect_right(self.hidden, (sequence, sequence)) - 1
        near = self.hidden[max(at, 0) : at + 2]
        return not any(first <= sequence <= last for first, last in near)

    def shows_checkpoint(self, checkpoint_sequence: int) -> bool:
        return checkpoint_sequence > self.epoch_checkpoint

    def visible(self, rows: Sequence[Any]) -> list[Any]:
        """The rows (anything with a ``sequence``) this view shows, in order."""
        if not self.hidden and not self.epoch_after:
            return list(rows)
        return [row for row in rows if self.shows(row.sequence)]

    def hiding(self, sequence: int) -> ConversationView:
        """This view with ``sequence`` hidden too (merged with a range it touches)."""
        ranges = sorted([*self.hidden, (sequence, sequence)])
        merged: list[tuple[int, int]] = []
        for first, last in ranges:
            if merged and first <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], last))
            else:
                merged.append((first, last))
        return ConversationView(tuple(merged), self.epoch_after, self.epoch_checkpoint)

    def new_epoch(self, last_sequence: int, checkpoint_sequence: int) -> ConversationView:
        """A view that hides every message up to ``last_sequence`` and every checkpoint up to
        ``checkpoint_sequence`` (ranges it covers are dropped: they hide nothing more)."""
        kept = tuple(r for r in self.hidden if r[1] > last_sequence)
        return ConversationView(
            kept,
            max(self.epoch_after, last_sequence),
            max(self.epoch_checkpoint, checkpoint_sequence),
        )

    def to_json(self) -> dict[str, Any] | None:
        if self == EMPTY_VIEW:
            return None
        return {
            "hidden": [list(r) for r in self.hidden],
            "epoch_after": self.epoch_after,
            "epoch_checkpoint": self.epoch_checkpoint,
        }


EMPTY_VIEW = ConversationView()


def view_from_json(stored: Any) -> ConversationView | None:
    """The view a stored value holds (``None`` stored: the empty view); ``None`` when the value
    is not one this module writes."""
    if stored is None:
        return EMPTY_VIEW
    if not isinstance(stored, dict):
        return None
    hidden, after, checkpoint = (
        stored.get("hidden"),
        stored.get("epoch_after"),
        stored.get("epoch_checkpoint"),
    )
    if not (isinstance(after, int) and isinstance(checkpoint, int)):
        return None
    if not (_count(after) and _count(checkpoint) and isinstance(hidden, list)):
        return None
    ranges: list[tuple[int, int]] = []
    for entry in hidden:
        if not (isinstance(entry, list) and len(entry) == 2 and all(map(_count, entry))):
            return None
        ranges.append((entry[0], entry[1]))
    if ranges != sorted(ranges) or any(first > last for first, last in ranges):
        return None
    return ConversationView(tuple(ranges), after, checkpoint)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
