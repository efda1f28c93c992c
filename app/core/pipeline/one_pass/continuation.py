"""Carrying ``prepare`` on from an earlier call's walk (stages 1–3) of the same conversation.

A turn calls ``prepare`` once per model call with the conversation it read before plus a few
new messages, the very same ``Item`` objects first. A walk's result for the segments before the
last non-tool message cannot change when messages are appended after them (each segment is
treated on its own, see ``segments.py``), so a call's result carries that walk with the caller's
items it covers (``ResumableWalk``). A later call handed that result (``prepare(extends=...)``,
the session's context in the services layer: ``app/services/session_context.py``) whose
conversation starts with those very objects (``is``, never ``==``), at a segment boundary, under
the same pruning watermark and data-block acceptance, walks only the rest.

Deterministic: a walk is carried on only for the identical objects it was computed from, and
items, their content lists and blocks are never changed in place (``content.py``; the budget's
cached measures rest on the same rule), so it is exactly what walking them again would give. A
message a stage rebuilt (pruned, projected, filtered, renamed or synthesized) may be handed out
again by a later call, as the caller's own unchanged items always are; like them it is
immutable.

Nothing is kept here: the walk lives as long as the result that carries it (the caller decides,
and bounds, how long that is). A caller that will never extend a result (a stateless request's)
says so (``remember=False``) and no walk is attached.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import is_

from app.core.content import Item
from app.core.pipeline.one_pass.segments import Walked, walk
from app.core.pipeline.prepared_call import PruningWatermark
from app.core.pipeline.salient import SalientLineMemo

__all__ = ["ResumableWalk", "walk_resuming"]


@dataclass(frozen=True, slots=True)
class ResumableWalk:
    """A walk of a conversation's leading whole segments, and what it was computed from."""

    source: tuple[Item, ...]  # the caller's items the walk covers: whole segments
    pruning: PruningWatermark
    accepts_data_blocks: bool
    walked: Walked


def walk_resuming(
    conversation: Sequence[Item],
    pruning: PruningWatermark,
    accepts_data_blocks: bool,
    *,
    earlier: ResumableWalk | None = None,
    remember: bool = True,
    salient: SalientLineMemo | None = None,
) -> tuple[Walked, ResumableWalk | None]:
    """``walk`` of the whole conversation, carrying on from ``earlier`` where it applies; and,
    unless ``remember`` is false, the walk of its leading whole segments, for a later call."""
    n = len(conversation)
    boundary = _last_segment_start(conversation)
    if boundary == 0 or (not remember and earlier is None):  # nothing to carry on from, or to
        return walk(conversation, 0, n, pruning, accepts_data_blocks, salient), None
    if earlier is None or not _continues(
        earlier, conversation, boundary, pruning, accepts_data_blocks
    ):
        head = walk(conversation, 0, boundary, pruning, accepts_data_blocks, salient)
        earlier = ResumableWalk(tuple(conversation[:boundary]), pruning, accepts_data_blocks, head)
    elif len(earlier.source) < boundary:
        covered = len(earlier.source)
        head = earlier.walked.then(
            walk(conversation, covered, boundary, pruning, accepts_data_blocks, salient)
        )
        earlier = ResumableWalk(tuple(conversation[:boundary]), pruning, accepts_data_blocks, head)
    walked = earlier.walked.then(
        walk(conversation, boundary, n, pruning, accepts_data_blocks, salient)
    )
    return walked, earlier if remember else None


def _last_segment_start(conversation: Sequence[Item]) -> int:
    for index in range(len(conversation) - 1, -1, -1):
        if conversation[index].role != "tool":
            return index
    return 0


def _continues(
    entry: ResumableWalk,
    conversation: Sequence[Item],
    boundary: int,
    pruning: PruningWatermark,
    accepts_data_blocks: bool,
) -> bool:
    """True when ``conversation`` starts with the walk's very items, ending a segment there."""
    covered = len(entry.source)
    return (
        covered <= boundary
        and entry.accepts_data_blocks == accepts_data_blocks
        and entry.pruning == pruning
        # covered ≤ boundary < len(conversation): the index exists.
        and conversation[covered].role != "tool"
        and all(map(is_, entry.source, conversation))
    )
