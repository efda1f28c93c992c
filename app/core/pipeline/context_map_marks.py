"""What the prepare stages did to each message of a prepared Conversation (for the context map).

The projection report counts what the stages did over the whole Conversation; a person reading
the request message by message wants to see it on the message: ``pruned`` (spec §2.1),
``truncated`` (§2.2: text cut or data blocks omitted), ``filtered`` (§2.3: data blocks removed
for a model without them) and ``synthesized`` (an item the service made: a compaction's three
items, an interrupted result). A message the stages kept is the caller's very object; only the
others are run through the stages' own functions again, one at a time, to tell which one
changed them (nothing here re-implements a rule).
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.content import Block, Item, RealOrigin, SyntheticOrigin
from app.core.pipeline.prepared_call import PruningWatermark
from app.core.pipeline.project import project_tool_results
from app.core.pipeline.prune import prune_tool_results

__all__ = ["message_marks"]


def message_marks(
    sent: Sequence[Item], loaded: Sequence[Item], watermark: PruningWatermark
) -> list[tuple[str, ...]]:
    """The marks of each item of ``sent`` (a prepared Conversation) made from ``loaded``."""
    own = {id(item) for item in loaded}
    by_id = {
        item.origin.message_id: item
        for item in loaded
        if isinstance(item.origin, RealOrigin) and item.origin.message_id is not None
    }
    marks: list[tuple[str, ...]] = []
    for item in sent:
        found: list[str] = []
        origin = item.origin
        if id(item) not in own and isinstance(origin, RealOrigin) and origin.message_id:
            original = by_id.get(origin.message_id)
            if original is not None:
                found += _rewrites(item, original, watermark)
        if isinstance(origin, SyntheticOrigin):
            found.append("synthesized")
        marks.append(tuple(found))
    return marks


def _rewrites(sent: Item, original: Item, watermark: PruningWatermark) -> list[str]:
    pruned = prune_tool_results([original], watermark)
    projected = project_tool_results(pruned.items)
    found: list[str] = []
    if pruned.pruned_tool_results:
        found.append("pruned")
    if projected.truncated_tool_results:
        found.append("truncated")
    if _data_blocks(sent.content) < _data_blocks(projected.items[0].content):
        found.append("filtered")
    return found


def _data_blocks(content: Sequence[Block]) -> int:
    count = 0
    for block in content:
        if block["type"] == "data":
            count += 1
        elif block["type"] == "tool_result":
            count += sum(1 for b in block["output"] if b["type"] == "data")
    return count
