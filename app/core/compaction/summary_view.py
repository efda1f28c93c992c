"""The bounded view of a conversation that a summary request sends (spec §7.3).

A compaction must be able to summarize any history, whatever a single stored item holds (rows
an older version accepted included) and whatever the summary model's window: the transcript
keeps every raw message, so the summary model may be given less. In order, the first view whose
request fits the summary model's input is used:

1. the summary conversation as spec §7.3 states it (``summary_request_conversation``) — every
   request that fits is exactly that, byte for byte;
2. the same with every item over ``item_bytes`` cut (``project_for_summary``): its text around
   a marker, as §2.2 cuts a tool result, its tool-call arguments and tool-result text alike,
   its data blocks replaced by a notice, its thinking and provider-opaque blocks left out;
3. that view without its oldest messages — the leading checkpoint items (replay, earlier
   summary, reminder) always stay, and a dropped part never starts with a tool result (a call
   is kept with its results) — keeping as many of the latest as fit (found by bisection).

When not even the leading items fit, the smallest view is returned and the caller refuses the
request (``summary_input_overflow``): the System Context alone is then too large.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from app.core.capabilities import MAX_TOOL_RESULT_TOKENS
from app.core.compaction.request import summary_request_conversation
from app.core.content import (
    Block,
    DataBlock,
    Item,
    OutputBlock,
    SyntheticOrigin,
    ToolCallBlock,
    ToolResultBlock,
    compact_json,
)
from app.core.counting import ESTIMATE, utf8_len
from app.core.pipeline.project import cut_around

__all__ = [
    "MIN_ITEM_TOKENS",
    "SUMMARY_ITEM_TOKENS",
    "fit_summary_request",
    "project_for_summary",
    "summary_item_bytes",
]

T = TypeVar("T")

# An item's share of a summary request that does not fit: the share §2.2 gives a tool result,
# or an eighth of the summary model's input when that is smaller (never under the minimum).
SUMMARY_ITEM_TOKENS = MAX_TOOL_RESULT_TOKENS
MIN_ITEM_TOKENS = 64


def summary_item_bytes(input_tokens: int) -> int:
    """Bytes (the estimate's 4 per token) an item may keep in a view that had to be cut."""
    return 4 * max(MIN_ITEM_TOKENS, min(SUMMARY_ITEM_TOKENS, input_tokens // 8))


def _marker(original: int, kept: int) -> str:
    return (
        f"\n...[cut for the summary: {original - kept} of {original} bytes omitted; the "
        "transcript keeps this message in full]...\n"
    )


def _cut(text: str, budget: int) -> str:
    size = utf8_len(text)
    if size <= budget:
        return text
    marker = _marker(size, budget)
    return cut_around(text, budget - utf8_len(marker), marker)


def _data_notice(blocks: Sequence[DataBlock]) -> str:
    size = sum(utf8_len(compact_json(b["source"])) for b in blocks)
    return f"[{len(blocks)} data block(s) of about {size} bytes left out of the summary request]"


def _cut_output(block: ToolResultBlock, budget: int) -> ToolResultBlock:
    texts = [b["text"] for b in block["output"] if b["type"] == "text"]
    data = [b for b in block["output"] if b["type"] == "data"]
    if data:
        texts.append(_data_notice(data))
    output: list[OutputBlock] = [{"type": "text", "text": _cut("\n".join(texts), budget)}]
    cut: ToolResultBlock = {
        "type": "tool_result",
        "id": block["id"],
        "name": block["name"],
        "output": output,
        "state": block["state"],
    }
    return cut


def _cut_call(block: ToolCallBlock, budget: int) -> ToolCallBlock:
    if utf8_len(block["input"]) <= budget:
        return block
    # Still a JSON object (Anthropic's tool_use input must be one), holding the cut text.
    cut_input = compact_json({"arguments_cut_for_summary": _cut(block["input"], budget)})
    return {**block, "input": cut_input}


def project_for_summary(item: Item, item_bytes: int) -> Item:
    """``item`` itself when its content is within ``item_bytes``; else a copy cut to about that
    size (its origin and kind kept: what the item is never changes)."""
    if ESTIMATE.measure_content(item.content) <= item_bytes:
        return item
    texts = [b["text"] for b in item.content if b["type"] == "text"]
    data = [b for b in item.content if b["type"] == "data"]
    if data:
        texts.append(_data_notice(data))
    calls = [b for b in item.content if b["type"] == "tool_call"]
    results = [b for b in item.content if b["type"] == "tool_result"]
    budget = item_bytes // max(1, (1 if texts else 0) + len(calls) + len(results))
    content: list[Block] = []
    if texts:
        content.append({"type": "text", "text": _cut("\n".join(texts), budget)})
    content.extend(_cut_call(c, budget) for c in calls)
    content.extend(_cut_output(r, budget) for r in results)
    if not content:  # only thinking and provider data: nothing the summary can use
        content.append({"type": "text", "text": _marker(ESTIMATE.measure_content(item.content), 0)})
    return Item(item.role, item.kind, content, item.origin)


def _tail_starts(items: Sequence[Item], first: int) -> list[int]:
    """Where a kept tail may start: never on a tool result (its call would be dropped)."""
    return [i for i in range(first, len(items)) if items[i].role != "tool"] + [len(items)]


def fit_summary_request(
    items: Sequence[Item],
    build: Callable[[list[Item]], T],
    fits: Callable[[T], bool],
    *,
    item_bytes: int,
) -> T:
    """The request ``build`` makes of the first view of ``items`` (the active projection) that
    ``fits``; the smallest view's when none does (see the module docstring)."""
    plain = build(summary_request_conversation(items))
    if fits(plain):
        return plain
    body = [project_for_summary(i, item_bytes) for i in items if i.kind != "world_state"]
    head = 0
    while head < len(body) and isinstance(body[head].origin, SyntheticOrigin):
        head += 1
    starts = _tail_starts(body, head)

    def view(start: int) -> T:
        return build(summary_request_conversation([*body[:head], *body[start:]]))

    low, high = 0, len(starts) - 1
    best = view(starts[high])
    if not fits(best):
        return best
    while low < high:  # the smallest start (the most kept) whose view fits
        middle = (low + high) // 2
        candidate = view(starts[middle])
        if fits(candidate):
            best, high = candidate, middle
        else:
            low = middle + 1
    return best
