"""A bounded memo that lets ``prepare`` carry on from an earlier call's walk (stages 1–3).

A turn calls ``prepare`` once per model call with the conversation it read before plus a few
new messages, the very same ``Item`` objects first. A walk's result for the segments before the
last non-tool message cannot change when messages are appended after them (each segment is
treated on its own, see ``walk.py``), so it is remembered with the caller's items it covers. A
later call whose conversation starts with those very objects (``is``, never ``==``), at a segment
boundary, under the same pruning watermark and data-block acceptance, walks only the rest.

Deterministic: a remembered walk is reused only for the identical objects it was computed from,
and items, their content lists and blocks are never changed in place (``content.py``; the
budget's cached measures rest on the same rule), so it is exactly what walking them again would
give. Only stages 1–3 are remembered: the request's dicts, the provenance, the report and every
measure are built anew on each call. A message a stage rebuilt (pruned, projected, filtered,
renamed or synthesized) may be handed out again by a later call, as the caller's own unchanged
items always are; like them it is immutable.

Bounded: at most ``MEMO_SLOTS`` conversations, keyed by the identity of their first message (an
entry keeps that message alive, so the key cannot be reused by another object while stored);
the least recently used is dropped. An entry references the items it covers, which a running
session holds anyway, and their pruned or projected copies.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from operator import is_

from app.core.content import Item
from app.core.prepared import PruningWatermark
from app.core.walk import Walked, walk

__all__ = ["MEMO_SLOTS", "forget", "walk_resuming"]

MEMO_SLOTS = 8


@dataclass(frozen=True, slots=True)
class _Entry:
    source: tuple[Item, ...]  # the caller's items the walk covers: whole segments
    pruning: PruningWatermark
    accepts_data_blocks: bool
    walked: Walked


_memo: dict[int, _Entry] = {}
_lock = threading.Lock()  # prepare may run in worker threads


def walk_resuming(
    conversation: Sequence[Item], pruning: PruningWatermark, accepts_data_blocks: bool
) -> Walked:
    """``walk`` of the whole conversation, reusing a remembered walk of its beginning."""
    n = len(conversation)
    boundary = _last_segment_start(conversation)
    if boundary == 0:  # one segment (or none): nothing that could be reused later
        return walk(conversation, 0, n, pruning, accepts_data_blocks)
    key = id(conversation[0])
    with _lock:
        entry = _memo.get(key)
    if entry is None or not _continues(entry, conversation, boundary, pruning, accepts_data_blocks):
        walked = walk(conversation, 0, boundary, pruning, accepts_data_blocks)
        entry = _Entry(tuple(conversation[:boundary]), pruning, accepts_data_blocks, walked)
    elif len(entry.source) < boundary:
        covered = len(entry.source)
        walked = entry.walked.then(
            walk(conversation, covered, boundary, pruning, accepts_data_blocks)
        )
        entry = _Entry(tuple(conversation[:boundary]), pruning, accepts_data_blocks, walked)
    with _lock:
        _memo.pop(key, None)  # (re)inserted last: the most recently used
        _memo[key] = entry
        while len(_memo) > MEMO_SLOTS:
            del _memo[next(iter(_memo))]
    return entry.walked.then(walk(conversation, boundary, n, pruning, accepts_data_blocks))


def forget() -> None:
    """Drop every remembered walk (tests and benchmarks measure a first call with it)."""
    with _lock:
        _memo.clear()


def _last_segment_start(conversation: Sequence[Item]) -> int:
    for index in range(len(conversation) - 1, -1, -1):
        if conversation[index].role != "tool":
            return index
    return 0


def _continues(
    entry: _Entry,
    conversation: Sequence[Item],
    boundary: int,
    pruning: PruningWatermark,
    accepts_data_blocks: bool,
) -> bool:
    """True when ``conversation`` starts with the entry's very items, ending a segment there."""
    covered = len(entry.source)
    return (
        covered <= boundary
        and entry.accepts_data_blocks == accepts_data_blocks
        and entry.pruning == pruning
        # covered ≤ boundary < len(conversation): the index exists.
        and conversation[covered].role != "tool"
        and all(map(is_, entry.source, conversation))
    )
