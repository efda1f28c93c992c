"""Stage 1: prune old tool results below the watermark (spec §2.1).

A pruned result keeps its first 4096 and last 1024 characters around a marker; the stored
message is never touched (this runs on the request copy). Characters are Unicode code points,
exactly as Python's ``str`` counts them. The salient lines of the omitted part (``salient.py``,
spec §9) follow the marker, within ``PRUNE_SALIENT_CHARS``; without any the text is exactly
spec §2.1's.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from app.core.content import Item, OutputBlock, TextBlock, ToolResultBlock
from app.core.pipeline.prepared_call import PruningWatermark
from app.core.pipeline.salient import (
    SALIENT_SHARE_PERCENT,
    SalientLineMemo,
    salient_lines,
    salient_section,
)

__all__ = [
    "PRUNE_HEAD_CHARS",
    "PRUNE_SALIENT_CHARS",
    "PRUNE_TAIL_CHARS",
    "PRUNE_THRESHOLD_CHARS",
    "PruneResult",
    "Spill",
    "prune_marker",
    "prune_tool_results",
    "spill_file_name",
    "spills",
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


@dataclass(frozen=True, slots=True)
class Spill:
    """A full result text and the path a spill marker names for it."""

    tool_call_id: str
    path: str
    text: str


def spill_file_name(tool_call_id: str) -> str:
    """``{id}.txt`` when the id holds only ``[A-Za-z0-9_-]``; otherwise every other character
    becomes ``_`` and ``.{digest}`` (16 hex digits of the raw id's SHA-256) follows, so that
    ids that sanitize alike (``a.b``, ``a/b``, ``a_b``) never share a file. The ``.`` cannot
    occur in an id kept as it is, so a digested name never equals a kept one."""
    safe = _UNSAFE_FILE_CHARS.sub("_", tool_call_id)
    if safe != tool_call_id:
        raw = tool_call_id.encode("utf-8", "surrogatepass")
        safe = f"{safe}.{hashlib.sha256(raw).hexdigest()[:16]}"
    return safe + ".txt"


def spill_path(spill_directory: str, tool_call_id: str) -> str:
    return f"{spill_directory.rstrip('/')}/{spill_file_name(tool_call_id)}"


def prune_marker(omitted: int, tool_call_id: str, spill_directory: str | None) -> str:
    """The marker text of spec §2.1 (U+2014 dash in the spill form)."""
    if spill_directory is None:
        return f"... [tool result pruned: {omitted} characters omitted]"
    path = spill_path(spill_directory, tool_call_id)
    return (
        f"... [tool result pruned: {omitted} characters omitted. "
        f"Full result at {path} — read it if you still need it]"
    )


def _eligible(item: Item, watermark: PruningWatermark) -> bool:
    """A stored tool message at or below the watermark (synthetic and live items have no
    sequence: never pruned)."""
    through, sequence = watermark.through_sequence, item.sequence
    if through is None or sequence is None:
        return False
    return item.role == "tool" and sequence <= through


def prune_tool_results(
    items: Sequence[Item], watermark: PruningWatermark, salient: SalientLineMemo | None = None
) -> PruneResult:
    """Prune every eligible tool result; unchanged items are returned as the same objects
    (``salient``: the caller's memo of salient lines found, ``salient.py``)."""
    if watermark.through_sequence is None:
        return PruneResult(list(items), 0)
    out: list[Item] = []
    pruned = 0
    for item in items:
        if not _eligible(item, watermark):
            out.append(item)
            continue
        new_content = None
        for index, block in enumerate(item.content):
            if block["type"] != "tool_result":
                continue
            new_block = _prune_block(block, watermark.spill_directory, salient)
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


def _pruned_text(block: ToolResultBlock) -> str | None:
    """The joined text of a result pruning cuts, ``None`` for one it keeps as it is."""
    texts = [b["text"] for b in block["output"] if b["type"] == "text"]
    if not texts:
        return None
    # Length of the "\n"-joined text without building it: most results are far below the line.
    total = sum(len(t) for t in texts) + len(texts) - 1
    if total <= PRUNE_THRESHOLD_CHARS:
        return None
    return "\n".join(texts)


def _prune_block(
    block: ToolResultBlock, spill_directory: str | None, memo: SalientLineMemo | None
) -> ToolResultBlock:
    joined = _pruned_text(block)
    if joined is None:
        return block
    total = len(joined)
    omitted = total - PRUNE_HEAD_CHARS - PRUNE_TAIL_CHARS
    marker = prune_marker(omitted, block["id"], spill_directory)
    tail_start = total - PRUNE_TAIL_CHARS
    salient, _ = salient_section(
        salient_lines(joined, PRUNE_HEAD_CHARS, tail_start, memo=memo), PRUNE_SALIENT_CHARS
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
    """A copy of ``block`` with another output, keys in spec §1 order, artifacts kept."""
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


def spills(items: Sequence[Item], watermark: PruningWatermark, sent: Sequence[Item]) -> list[Spill]:
    """The full texts the spill markers in ``sent`` (the prepared items) name, in order.

    For a caller that stores nothing server-side (``POST /v1/prepare``): it writes each text to
    its path, so the marker the model reads leads somewhere. One per path, the first as the
    stateful spill keeps (it never overwrites); a pruned result whose marker is not sent (an
    orphan or a duplicate that normalize dropped) has none.
    """
    directory = watermark.spill_directory
    if directory is None or watermark.through_sequence is None:
        return []
    sent_texts: dict[str, str] = {}
    for item in sent:
        for block in item.content:
            if block["type"] == "tool_result" and block["id"] not in sent_texts:
                sent_texts[block["id"]] = "\n".join(
                    b["text"] for b in block["output"] if b["type"] == "text"
                )
    out: dict[str, Spill] = {}
    for item in items:
        if not _eligible(item, watermark):
            continue
        for block in item.content:
            if block["type"] != "tool_result":
                continue
            path = spill_path(directory, block["id"])
            joined = _pruned_text(block)
            if joined is None or path in out:
                continue
            if f"Full result at {path} " in sent_texts.get(block["id"], ""):
                out[path] = Spill(block["id"], path, joined)
    return list(out.values())
