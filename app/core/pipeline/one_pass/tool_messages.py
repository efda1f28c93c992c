"""Stages 1 and 2 one tool message at a time, for the single pass of ``prepare`` (spec §2.1, §2.2).

Pruning and projection both map each message on its own, so running them on one message at a
time gives the same messages and the same counts as running them over the whole list. Most tool
results are far below both lines: ``ToolResultRewriter`` tells that from character counts alone
and hands the message back untouched; only the others go through the two stages themselves, so
the rules live in one place (``prune.py``, ``project.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.content import Item, OutputBlock
from app.core.pipeline.prepared_call import PruningWatermark
from app.core.pipeline.project import PROJECTION_BUDGET_BYTES, project_tool_results
from app.core.pipeline.prune import PRUNE_THRESHOLD_CHARS, prune_tool_results
from app.core.pipeline.salient import SalientLineMemo

__all__ = ["UNCHANGED_CHARS", "ToolResultRewriter"]

# A result whose characters, plus one per output block, are at most this many is never changed:
# its "\n"-joined text is at most 8192 characters (not pruned), and at ≤ 4 UTF-8 bytes a
# character its visible size is at most 32 000 bytes (not projected). A result of one text block
# shorter than this is such a result.
UNCHANGED_CHARS = min(PRUNE_THRESHOLD_CHARS, PROJECTION_BUDGET_BYTES // 4)


class ToolResultRewriter:
    """Prunes and projects one tool message at a time and tallies what both stages report."""

    __slots__ = (
        "_salient",
        "_watermark",
        "original_tokens",
        "projected_tokens",
        "pruned",
        "truncated",
    )

    def __init__(self, watermark: PruningWatermark, salient: SalientLineMemo | None) -> None:
        self._watermark = watermark
        self._salient = salient
        self.pruned = 0
        self.truncated = 0
        self.original_tokens = 0
        self.projected_tokens = 0

    def rewrite(self, item: Item) -> Item:
        """``item`` after stages 1 and 2; the very same object when neither changes it."""
        for block in item.content:
            if block["type"] != "tool_result":
                continue
            output = block["output"]
            # The usual result, one text block, needs no loop.
            if len(output) == 1 and output[0]["type"] == "text":
                if len(output[0]["text"]) >= UNCHANGED_CHARS:
                    break
            elif _char_count(output) > UNCHANGED_CHARS:
                break
        else:
            return item
        pruned = prune_tool_results([item], self._watermark, self._salient)
        projected = project_tool_results(pruned.items, self._salient)
        self.pruned += pruned.pruned_tool_results
        self.truncated += projected.truncated_tool_results
        self.original_tokens += projected.original_tokens
        self.projected_tokens += projected.projected_tokens
        return projected.items[0]


def _char_count(output: Sequence[OutputBlock]) -> int:
    """Characters of the text and data strings, plus one per block (the bound of the line)."""
    total = len(output)
    for b in output:
        if b["type"] == "text":
            total += len(b["text"])
        else:
            # The strings ``project._char_bound`` counts for a data block.
            total += sum(len(v) for v in b["source"].values() if isinstance(v, str))
            total += len(b["name"] or "")
    return total
