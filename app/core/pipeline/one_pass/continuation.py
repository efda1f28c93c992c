"""A bounded memo that lets ``prepare`` carry on from an earlier call's walk (stages 1–3).

A turn calls ``prepare`` once per model call with the conversation it read before plus a few
new messages, the very same ``Item`` objects first. A walk's result for the segments before the
last non-tool message cannot change when messages are appended after them (each segment is
treated on its own, see ``segments.py``), so it is remembered with the caller's items it covers. A
later call whose conversation starts with those very objects (``is``, never ``==``), at a segment
boundary, under the same pruning watermark and data-block acceptance, walks only the rest.

Deterministic: a remembered walk is reused only for the identical objects it was computed from,
and items, their content lists and blocks are never changed in place (``content.py``; the
budget's cached measures rest on the same rule), so it is exactly what walking them again would
give. Only stages 1–3 are remembered here: the request's dicts, the provenance, the report and
every measure are built anew on each call, unless the caller hands ``prepare`` its previous
call's result (``extends``, a turn's model calls), which then lends them for the items shared.
A message a stage rebuilt (pruned, projected, filtered, renamed or synthesized) may be handed
out again by a later call, as the caller's own unchanged items always are; like them it is
immutable.

Bounded: at most ``MEMO_SLOTS`` conversations and ``MEMO_BYTES`` of their content, keyed by the
identity of their first message (an entry keeps that message alive, so the key cannot be reused
by another object while stored); the least recently used is dropped. An entry references the
items it covers, which the caller holds anyway while it prepares the same conversation again (a
turn, or the service's cache of stored Conversations), and their pruned or projected copies. Its
size is the content it covers: an item's cached figure (the estimate's is its JSON bytes; an
exact counter's tokens count four bytes each, the estimate's own ratio) or, without one, the
length of its compact JSON. A caller that will never pass the same objects again (a stateless
request's items, built from its body) says so (``remember=False``) and leaves nothing behind.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from operator import is_

from app.core.content import Item, compact_json
from app.core.pipeline.one_pass.segments import Walked, walk
from app.core.pipeline.prepared_call import PruningWatermark

__all__ = ["MEMO_BYTES", "MEMO_SLOTS", "forget", "held_bytes", "walk_resuming"]

MEMO_SLOTS = 8
MEMO_BYTES = 256 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class _Entry:
    source: tuple[Item, ...]  # the caller's items the walk covers: whole segments
    pruning: PruningWatermark
    accepts_data_blocks: bool
    walked: Walked
    size: int  # the content it covers (see the module's docstring)


_memo: dict[int, _Entry] = {}
_held = [0]  # Σ size of the entries
_lock = threading.Lock()  # prepare may run in worker threads


def _size(items: Sequence[Item]) -> int:
    total = 0
    for item in items:
        cached = item.cached
        if cached is None:
            total += len(compact_json(item.content))
        else:
            total += cached.measure if cached.counter == "estimate" else 4 * cached.measure
    return total


def walk_resuming(
    conversation: Sequence[Item],
    pruning: PruningWatermark,
    accepts_data_blocks: bool,
    *,
    remember: bool = True,
) -> Walked:
    """``walk`` of the whole conversation, reusing a remembered walk of its beginning (and
    remembering this one unless ``remember`` is false)."""
    n = len(conversation)
    boundary = _last_segment_start(conversation)
    if boundary == 0 or not remember:  # nothing that could be reused later
        return walk(conversation, 0, n, pruning, accepts_data_blocks)
    key = id(conversation[0])
    with _lock:
        entry = _memo.get(key)
    if entry is None or not _continues(entry, conversation, boundary, pruning, accepts_data_blocks):
        walked = walk(conversation, 0, boundary, pruning, accepts_data_blocks)
        source = tuple(conversation[:boundary])
        entry = _Entry(source, pruning, accepts_data_blocks, walked, _size(source))
    elif len(entry.source) < boundary:
        covered = len(entry.source)
        walked = entry.walked.then(
            walk(conversation, covered, boundary, pruning, accepts_data_blocks)
        )
        size = entry.size + _size(conversation[covered:boundary])
        entry = _Entry(tuple(conversation[:boundary]), pruning, accepts_data_blocks, walked, size)
    with _lock:
        old = _memo.pop(key, None)  # (re)inserted last: the most recently used
        if old is not None:
            _held[0] -= old.size
        if entry.size <= MEMO_BYTES:
            _memo[key] = entry
            _held[0] += entry.size
        while len(_memo) > MEMO_SLOTS or _held[0] > MEMO_BYTES:
            _held[0] -= _memo.pop(next(iter(_memo))).size
    return entry.walked.then(walk(conversation, boundary, n, pruning, accepts_data_blocks))


def forget() -> None:
    """Drop every remembered walk (tests and benchmarks measure a first call with it)."""
    with _lock:
        _memo.clear()
        _held[0] = 0


def held_bytes() -> int:
    """The content the remembered walks cover, in the bytes of ``MEMO_BYTES``."""
    return _held[0]


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
