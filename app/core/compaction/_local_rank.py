"""What each entry of a ``local`` summary is worth: the rank that decides what goes first when
the summary is over its cap (spec §9; docs/compaction.md, "What the offline summarizer keeps").

Eviction order, first to go first: assistant narrative, filler requests, instructions a later
one replaced, everyday entries (requests naming an identifier, a path or an error; paths;
errors), the user's softer rules, key facts (who owns what, the most severe errors, the
latest metric values), the pending plan, and last the user's red lines and decisions. Within a
rank the least recently seen goes first: age decides only between entries of equal worth,
never across ranks.

A later instruction that replaces an earlier one (``app.core.facts.replaced_by``) leaves the
earlier one in the summary only marked ``REPLACED_MARK``, ranked with filler: it is never shown
as if it were still current.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.compaction._local_text import is_salient_request
from app.core.facts import (
    Reading,
    Severity,
    Strength,
    replaced_by,
    severity,
    states_ownership,
    strength,
)

__all__ = [
    "CONSTRAINT",
    "FILLER",
    "KEEP",
    "KEY_FACT",
    "NARRATIVE",
    "PINNED",
    "PLAN",
    "REPLACED",
    "REPLACED_MARK",
    "RULE",
    "error_rank",
    "latest_readings",
    "mark_replaced",
    "request_rank",
]

# Ranks: the highest goes first when the summary is over its cap.
PINNED, CONSTRAINT, PLAN, KEY_FACT, RULE, KEEP, REPLACED, FILLER, NARRATIVE = range(-1, 8)

REPLACED_MARK = "[replaced by a later request] "


def request_rank(text: str, first: str | None) -> int:
    if text.startswith(REPLACED_MARK):
        return REPLACED
    binds = strength(text)
    if binds is Strength.RED_LINE:
        return CONSTRAINT
    if states_ownership(text):
        return KEY_FACT
    if binds is Strength.RULE:
        return RULE
    if is_salient_request(text) or (first is not None and text == first):
        return KEEP
    return FILLER


def mark_replaced(texts: Sequence[str], new: Sequence[bool]) -> set[int]:
    """The indexes of ``texts`` (the user's requests, oldest first) that a later new one
    replaces. Only new requests revoke (an earlier summary's were applied when it was written),
    and only what is not marked already can be replaced."""
    replaced: set[int] = set()
    for index, text in enumerate(texts):
        if not new[index]:
            continue
        candidates = [
            i for i in range(index) if i not in replaced and not texts[i].startswith(REPLACED_MARK)
        ]
        target = replaced_by(text, [texts[i] for i in candidates])
        if target is not None:
            replaced.add(candidates[target])
    return replaced


def error_rank(text: str) -> int:
    return KEY_FACT if severity(text) is Severity.FATAL else KEEP


def latest_readings(
    carried: Sequence[tuple[str, str, str | None]], new: Sequence[Reading]
) -> list[tuple[str, str, str | None]]:
    """``(name, latest value, the value it replaced)`` per metric, least recently changed first:
    an earlier summary's, updated by the new readings in order."""
    latest: dict[str, tuple[str, str, str | None]] = {}
    for name, value, was in carried:
        latest[Reading(name, value).key] = (name, value, was)
    for reading in new:
        key = reading.key
        before = latest.pop(key, None)
        if before is None:
            latest[key] = (reading.name, reading.value, None)
        elif before[1] == reading.value:
            latest[key] = before  # the same value again: nothing replaced, recent again
        else:
            latest[key] = (reading.name, reading.value, before[1])
    return list(latest.values())
