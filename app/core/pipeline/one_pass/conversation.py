"""Stages 1–4 of ``prepare`` for the Conversation, as one walk and one assembly (spec §2, §3.1).

``walk_resuming`` prunes, projects and normalizes it (``segments.py``; the beginning of a growing
conversation is not walked again when an earlier call's walk is handed in, ``continuation.py``);
then the request messages, the provenance and the split of the budget's measure are built in one
go over the normalized messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.core.content import Item
from app.core.pipeline.one_pass.continuation import ResumableWalk, walk_resuming
from app.core.pipeline.one_pass.shared_objects import same_objects
from app.core.pipeline.prepared_call import ProjectionReport, PruningWatermark, RequestMessage
from app.core.pipeline.salient import SalientLineMemo

__all__ = ["ConversationPass", "EarlierPass", "single_pass"]


@dataclass(frozen=True, slots=True)
class ConversationPass:
    items: list[Item]  # the normalized Conversation
    messages: list[RequestMessage]  # its request messages (artifacts removed)
    # Per item, the cached figure the budget may reuse (or the earlier call's figure, for an item
    # shared with it), else 0 with its index in ``unmeasured``.
    measures: list[int]
    unmeasured: list[int]  # indexes of the other items, in order: the budget measures them
    system_message_at: int | None  # index in the caller's conversation: ``Walked``
    report: ProjectionReport
    # The walk of its leading whole segments, for a later call to carry on from (``None``:
    # not remembered).
    walk: ResumableWalk | None = None
    shared: int = 0  # leading items taken from ``extends`` (its very objects and messages)


@dataclass(frozen=True, slots=True)
class EarlierPass:
    """An earlier call's normalized items, their request messages and final measures (by the
    same counter): what ``single_pass`` may take for the leading items it shares."""

    items: Sequence[Item]
    messages: Sequence[RequestMessage]
    measures: Sequence[int]
    walk: ResumableWalk | None = None  # its walk (``continuation.py``)


def single_pass(
    conversation: Sequence[Item],
    pruning: PruningWatermark,
    *,
    accepts_data_blocks: bool,
    counter_name: str,
    remember: bool = True,
    extends: EarlierPass | None = None,
    salient: SalientLineMemo | None = None,
) -> ConversationPass:
    """Prune, project, normalize and assemble the Conversation; raises what normalize raises.

    A message of another role is not raised here but reported (``system_message_at``): the
    system context is validated before it (spec §2.4 order), and after normalize.

    A cached figure of ``counter_name`` is reused for every item that carries one. That is what
    the budget's rule (only the caller's own, untouched objects) gives, because no stage attaches
    a cache to an item it builds: a cached item here is one of the caller's, unchanged.

    ``extends``: an earlier call's pass by the same counter; its walk is carried on
    (``continuation.py``), and the leading items that are its very objects take its messages
    and figures (the same item gives the same message, and the
    same figure under the same counter), so only the rest is assembled.
    """
    walked, resumable = walk_resuming(
        conversation,
        pruning,
        accepts_data_blocks,
        earlier=None if extends is None else extends.walk,
        remember=remember,
        salient=salient,
    )
    items = list(walked.items)
    # The leading items that are the very objects of an earlier call's: their messages (built
    # by the same rule from the same item) and measures (by the same counter) are those.
    shared = 0 if extends is None else same_objects(extends.items, items)
    rest = items[shared:] if shared else items
    # Comprehensions, not one loop with appends: this is the per-message cost of every call.
    messages: list[RequestMessage] = [{"role": item.role, "content": item.content} for item in rest]
    measures = [0] * len(items)
    unmeasured: list[int] = []
    for index, item in enumerate(rest, shared):
        cached = item.cached
        if cached is not None and cached.counter == counter_name:
            measures[index] = cached.measure
        else:
            unmeasured.append(index)
    if shared:
        assert extends is not None
        messages[:0] = extends.messages[:shared]
        measures[:shared] = extends.measures[:shared]
    for index, content in zip(walked.artifacts, walked.stripped, strict=True):
        if index >= shared:
            messages[index]["content"] = content
    return ConversationPass(
        items,
        messages,
        measures,
        unmeasured,
        walked.system_message_at,
        walked.report(),
        resumable,
        shared,
    )
