"""Stage 1: prune old tool results below the watermark (SPEC §2.1).

A pruned result keeps its first 4096 and last 1024 characters around a marker; the stored
message is never touched (this runs on the request copy). Characters are Unicode code points,
exactly as Python's ``str`` counts them. The salient lines of the omitted part (``salient.py``,
SPEC §9) follow the marker, within ``PRUNE_SALIENT_CHARS``; without any the text is exactly
SPEC §2.1's.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.core.content import Item, OutputBlock, TextBlock, ToolResultBlock
from app.core.prepared import PruningWatermark
from app.core.salient import SALIENT_SHARE_PERCENT, salient_lines, salient_section

__all__ = [
    "PRUNE_HEAD_CHARS",
    "PRUNE_SALIENT_CHARS",
    "PRUNE_TAIL_CHARS",
    "PRUNE_THRESHOLD_CHARS",
    "PruneResult",
    "prune_marker",
    "prune_tool_results",
    "spill_file_name",
    "with_output",
]

PRUNE_THRESHOLD_CHARS = 8192  # pruned only when strictly more
PRUNE_HEAD_CHARS = 4096
PRUNE_TAIL_CHARS = 1024
# The salient section's share of the 5120 characters kept: 1280. A pruned text therefore stays
# under 6 600 characters (≤ 26 400 bytes), far below the projection line.
PRUNE_SALIENT_CHARS = (PRUNE_HEAD_CHARS + PRUNE_TAIL_CHARS) * SALIENT_SHARE_PERCENT // 100

_UNSAFE_FILE_CHARS = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class PruneResult:
    items: list[Item]
    pruned_tool_results: int


def spill_file_name(tool_call_id: str) -> str:
    """``{id}.txt`` with every character outside ``[A-Za-z0-9_-]`` replaced by ``_``."""
    return _UNSAFE_FILE_CHARS.sub("_", tool_call_id) + ".txt"


def prune_marker(omitted: int, tool_call_id: str, spill_directory: str | None) -> str:
    """The marker text of SPEC §2.1 (U+2014 dash in the spill form)."""
    if spill_directory is None:
        return f"... [tool result pruned: {omitted} characters omitted]"
    path = f"{spill_directory.rstrip('/')}/{spill_file_name(tool_call_id)}"
    return (
        f"... [tool result pruned: {omitted} characters omitted. "
        f"Full result at {path} — read it if you still need it]"
    )


def prune_tool_results(items: Sequence[Item], watermark: PruningWatermark) -> PruneResult:
    """Prune every eligible tool result; unchanged items are returned as the same objects."""
    through = watermark.through_sequence
    if through is None:
        return PruneResult(list(items), 0)
    out: list[Item] = []
    pruned = 0
    for item in items:
        sequence = item.sequence  # None for synthetic origins and live items: never pruned
        if item.role != "tool" or sequence is None or sequence > through:
            out.append(item)
            continue
        new_content = None
        for index, block in enumerate(item.content):
            if block["type"] != "tool_result":
                continue
            new_block = _prune_block(block, watermark.spill_directory)
            if new_block is not block:
                if new_content is None:
                    new_content = list(item.content)
                new_content[index] = new_block
                pruned += 1
        if new_content is None:
            out.append(item)
        else:
            out.append(Item(item.role, item.kind, new_content, item.origin))
    return PruneResult(out, pruned)


def _prune_block(block: ToolResultBlock, spill_directory: str | None) -> ToolResultBlock:
    texts = [b["text"] for b in block["output"] if b["type"] == "text"]
    if not texts:
        return block
    # Length of the "\n"-joined text without building it: most results are far below the line.
    total = sum(len(t) for t in texts) + len(texts) - 1
    if total <= PRUNE_THRESHOLD_CHARS:
        return block
    joined = "\n".join(texts)
    omitted = total - PRUNE_HEAD_CHARS - PRUNE_TAIL_CHARS
    marker = prune_marker(omitted, block["id"], spill_directory)
    tail_start = total - PRUNE_TAIL_CHARS
    salient, _ = salient_section(
        salient_lines(joined, PRUNE_HEAD_CHARS, tail_start), PRUNE_SALIENT_CHARS
    )
    text = f"{joined[:PRUNE_HEAD_CHARS]}\n{marker}\n{salient}{joined[tail_start:]}"
    output: list[OutputBlock] = []
    placed = False
    for b in block["output"]:
        if b["type"] != "text":
            output.append(b)  # data blocks are kept where they were
        elif not placed:
            replacement: TextBlock = {"type": "text", "text": text}
            output.append(replacement)
            placed = True
    return with_output(block, output)


def with_output(block: ToolResultBlock, output: list[OutputBlock]) -> ToolResultBlock:
    """A copy of ``block`` with another output, keys in SPEC §1 order, artifacts kept."""
    new: ToolResultBlock = {
        "type": "tool_result",
        "id": block["id"],
        "name": block["name"],
        "output": output,
        "state": block["state"],
    }
    if "artifacts" in block:
        new["artifacts"] = block["artifacts"]
    return new
