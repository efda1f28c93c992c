"""Stage 3: pair tool calls with results and filter data blocks (spec §2.3).

After an assistant message comes exactly one tool message per tool call, in call order: the
first stored result for that call, or a synthesized ``interrupted`` result (e.g. the turn's
runner died before the result was stored). Orphan, duplicate and unknown results are dropped
from the request copy; the stored history is never repaired.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.core.content import (
    Block,
    Item,
    OutputBlock,
    SyntheticOrigin,
    TextBlock,
    ToolResultBlock,
)
from app.core.errors import InvalidInput
from app.core.pipeline.prune import with_output

__all__ = [
    "INTERRUPTED_ORIGIN",
    "INTERRUPTED_TEXT",
    "NormalizeResult",
    "Normalizer",
    "normalize",
    "synthesized_result",
]

INTERRUPTED_TEXT = (
    "Tool result unavailable: the previous turn ended before a durable result was recorded."
)
# The origin of every synthesized result: no row, no checkpoint.
INTERRUPTED_ORIGIN = SyntheticOrigin(None, "interrupted_tool_result")


@dataclass(frozen=True, slots=True)
class NormalizeResult:
    items: list[Item]
    synthesized_tool_results: int
    dropped_orphan_results: int
    filtered_data_blocks: int


def synthesized_result(call_id: str, name: str) -> Item:
    """The interrupted result for a call without one: the same call always gives the same bytes.

    Its provenance is ``synthesized`` with the reason ``interrupted_tool_result``.
    """
    text: TextBlock = {"type": "text", "text": INTERRUPTED_TEXT}
    block: ToolResultBlock = {
        "type": "tool_result",
        "id": call_id,
        "name": name,
        "output": [text],
        "state": "interrupted",
    }
    return Item("tool", "normal", [block], INTERRUPTED_ORIGIN)


class Normalizer:
    """The rules of this stage, one message or one assistant's result run at a time.

    ``run`` applies them to a whole conversation; the single pass of ``prepare`` calls
    ``filter_item``, ``pair`` and ``drop_orphan`` itself for the messages it does not take the
    usual way. The counts add up over every call.
    """

    def __init__(self, accepts_data_blocks: bool) -> None:
        self.accepts_data_blocks = accepts_data_blocks
        self.synthesized = 0
        self.dropped = 0
        self.filtered = 0

    def run(self, items: Sequence[Item]) -> NormalizeResult:
        out: list[Item] = []
        n = len(items)
        i = 0
        while i < n:
            item = items[i]
            if item.role == "tool":
                # Not consumed by a preceding assistant message: an orphan.
                self.drop_orphan(item)
                i += 1
                continue
            out.append(self.filter_item(item, i))
            i += 1
            if item.role != "assistant":
                continue
            run_start = i
            while i < n and items[i].role == "tool":
                i += 1
            out += self.pair(item, items[run_start:i])
        return NormalizeResult(out, self.synthesized, self.dropped, self.filtered)

    def drop_orphan(self, item: Item) -> None:
        """Count the results of a tool message no assistant message consumed."""
        self.dropped += _result_count(item)

    def pair(self, assistant: Item, run: Sequence[Item]) -> list[Item]:
        """The tool messages sent after ``assistant``, from the tool messages that follow it."""
        out: list[Item] = []
        calls = [(b["id"], b["name"]) for b in assistant.content if b["type"] == "tool_call"]
        wanted = {call_id for call_id, _ in calls}
        # First result per call id, with the item it came from (to reuse it untouched).
        found: dict[str, tuple[Item, ToolResultBlock]] = {}
        for tool_item in run:
            for block in tool_item.content:
                if block["type"] != "tool_result":
                    continue
                if block["id"] in wanted and block["id"] not in found:
                    found[block["id"]] = (tool_item, block)
                else:
                    self.dropped += 1  # duplicate or unknown id
        for call_id, name in calls:
            match = found.pop(call_id, None)  # pop: a repeated call id cannot reuse a result
            if match is None:
                self.synthesized += 1
                out.append(synthesized_result(call_id, name))
                continue
            tool_item, block = match
            new_block = self._filter_result(block)
            if new_block["name"] != name:
                new_block = with_output(new_block, new_block["output"])
                new_block["name"] = name
            if new_block is block and len(tool_item.content) == 1:
                out.append(tool_item)
            else:
                out.append(Item("tool", tool_item.kind, [new_block], tool_item.origin))
        return out

    def filter_item(self, item: Item, index: int) -> Item:
        """Remove data blocks the model cannot take; a real user request with one fails."""
        if self.accepts_data_blocks:
            return item
        if not any(b["type"] == "data" for b in item.content):
            return item
        if item.is_user_request:
            raise InvalidInput(
                "data_blocks_not_accepted",
                f"the model does not accept data blocks (images, files) in a user request "
                f"(conversation item {index}); remove them or choose a model that accepts them",
                item_index=index,
            )
        kept: list[Block] = [b for b in item.content if b["type"] != "data"]
        self.filtered += len(item.content) - len(kept)
        return Item(item.role, item.kind, kept, item.origin)

    def _filter_result(self, block: ToolResultBlock) -> ToolResultBlock:
        if self.accepts_data_blocks or not any(b["type"] == "data" for b in block["output"]):
            return block
        kept: list[OutputBlock] = [b for b in block["output"] if b["type"] != "data"]
        self.filtered += len(block["output"]) - len(kept)
        return with_output(block, kept)


def _result_count(item: Item) -> int:
    return sum(1 for b in item.content if b["type"] == "tool_result")


def normalize(items: Sequence[Item], *, accepts_data_blocks: bool) -> NormalizeResult:
    """Pair calls and results and filter data blocks; unchanged items stay the same objects.

    Raises ``InvalidInput`` (``data_blocks_not_accepted``, with ``item_index``) for a data block
    in a real user request when the model does not accept data blocks.
    """
    return Normalizer(accepts_data_blocks).run(items)
