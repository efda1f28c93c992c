"""Stage 2: project oversized tool results into the per-result budget (spec §2.2).

A result whose visible size exceeds 8000 estimated tokens loses its data blocks (replaced by one
notice) and, if its text is still over 32 000 bytes, keeps a 75 % head and a 25 % tail of its
text around a marker. Cuts fall on UTF-8 character boundaries. ``id``, ``name``, ``state`` and
``artifacts`` are kept; the authoritative stored result is never changed. The salient lines of
the cut part follow the marker (``salient.py``, spec §9; see ``_truncate``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.core.capabilities import MAX_TOOL_RESULT_TOKENS
from app.core.content import DataBlock, Item, OutputBlock, TextBlock, ToolResultBlock
from app.core.counting import estimate_tokens, utf8_len
from app.core.pipeline.prune import with_output
from app.core.pipeline.salient import (
    SALIENT_SHARE_PERCENT,
    SalientLineMemo,
    salient_lines,
    salient_section,
)

__all__ = [
    "PROJECTION_BUDGET_BYTES",
    "ProjectResult",
    "cut_around",
    "data_omission_notice",
    "project_tool_results",
    "truncation_marker",
    "visible_bytes",
]

PROJECTION_BUDGET_BYTES = MAX_TOOL_RESULT_TOKENS * 4
_HEAD_PERCENT = 75


@dataclass(frozen=True, slots=True)
class ProjectResult:
    items: list[Item]
    truncated_tool_results: int
    original_tokens: int  # summed over the truncated results
    projected_tokens: int  # the same results after projection


def data_omission_notice(count: int, byte_count: int) -> str:
    return (
        f"[tool result omitted {count} data block(s), approximately {byte_count} bytes; "
        "the authoritative result remains unchanged]"
    )


def truncation_marker(original_tokens: int) -> str:
    # spec §2.2 wording ("continue with narrower reads"), not the original runtime's.
    return (
        f"\n...[tool result truncated; original≈{original_tokens} tokens; "
        f"projected={MAX_TOOL_RESULT_TOKENS}; continue with narrower reads]...\n"
    )


def _data_bytes(block: DataBlock) -> int:
    source = block["source"]
    total = 0
    for key in ("url", "data", "id", "media_type"):
        value = source.get(key)
        if isinstance(value, str):
            total += utf8_len(value)
    name = block["name"]
    return total + (utf8_len(name) if name else 0)


def visible_bytes(output: Sequence[OutputBlock]) -> int:
    """UTF-8 bytes of the text plus, for data blocks, the url/data/id, media_type and name."""
    total = 0
    for b in output:
        total += utf8_len(b["text"]) if b["type"] == "text" else _data_bytes(b)
    return total


def _char_bound(output: Sequence[OutputBlock]) -> int:
    """An upper bound of ``visible_bytes`` / 4 that needs no encoding: a character is ≤ 4 bytes."""
    total = 0
    for b in output:
        if b["type"] == "text":
            total += len(b["text"])
        else:
            source = b["source"]
            total += sum(len(v) for v in source.values() if isinstance(v, str))
            total += len(b["name"] or "")
    return total


def project_tool_results(
    items: Sequence[Item], salient: SalientLineMemo | None = None
) -> ProjectResult:
    """Project every oversized tool result; unchanged items are returned as the same objects
    (``salient``: the caller's memo of salient lines found, ``salient.py``)."""
    out: list[Item] = []
    truncated = original_sum = projected_sum = 0
    for item in items:
        if item.role != "tool":
            out.append(item)
            continue
        new_content = None
        for index, block in enumerate(item.content):
            if block["type"] != "tool_result":
                continue
            # Fast path: characters × 4 bounds the bytes, so most results never get encoded.
            if _char_bound(block["output"]) * 4 <= PROJECTION_BUDGET_BYTES:
                continue
            original = estimate_tokens(visible_bytes(block["output"]))
            if original <= MAX_TOOL_RESULT_TOKENS:
                continue
            new_block, projected_bytes = _project_block(block, original, salient)
            if new_content is None:
                new_content = list(item.content)
            new_content[index] = new_block
            truncated += 1
            original_sum += original
            projected_sum += estimate_tokens(projected_bytes)
        if new_content is None:
            out.append(item)
        else:
            out.append(Item(item.role, item.kind, new_content, item.origin))
    return ProjectResult(out, truncated, original_sum, projected_sum)


def _project_block(
    block: ToolResultBlock, original_tokens: int, memo: SalientLineMemo | None
) -> tuple[ToolResultBlock, int]:
    """The projected block and its ``visible_bytes`` (known from its pieces: the marker is not
    ASCII, so encoding the ~32 000-character text to count them cost ~30 µs a result)."""
    texts: list[str] = []
    removed = removed_bytes = 0
    for b in block["output"]:
        if b["type"] == "text":
            texts.append(b["text"])
        else:
            removed += 1
            removed_bytes += _data_bytes(b)
    if removed:
        texts.append(data_omission_notice(removed, removed_bytes))
    size = sum(utf8_len(t) for t in texts)
    if size > PROJECTION_BUDGET_BYTES:
        text, size = _truncate("".join(texts), truncation_marker(original_tokens), memo)
        texts = [text]
    output: list[OutputBlock] = []
    for text in texts:
        if text:  # empty text blocks carry nothing for the model (nor bytes)
            tb: TextBlock = {"type": "text", "text": text}
            output.append(tb)
    return with_output(block, output), size


def _truncate(text: str, marker: str, memo: SalientLineMemo | None) -> tuple[str, int]:
    """``text`` cut to the budget around ``marker``, with the salient lines of the cut part, and
    its UTF-8 bytes.

    Without a salient line in the part a plain cut would drop, the cut is spec §2.2's exactly.
    With some, ``SALIENT_SHARE_PERCENT`` of the budget is set aside for them (``salient.py``):
    head and tail split the rest 75/25, and the section follows the marker; everything sent
    stays within the 32 000 bytes the report's ``projected=8000`` promises.
    """
    content_bytes = PROJECTION_BUDGET_BYTES - utf8_len(marker)
    cut = _Cut(text)
    plain = cut.split(content_bytes)
    reserve = content_bytes * SALIENT_SHARE_PERCENT // 100
    head, tail = cut.split(content_bytes - reserve)
    # The wider cut's lines, unless none of them is in the part the plain cut drops.
    lines = salient_lines(text, head, tail, touching=plain, memo=memo)
    if not lines:
        head, tail = plain
        added = marker
    else:
        section, _ = salient_section(lines, reserve, utf8_len)
        added = marker + section
    cut_text = text[:head] + added + text[tail:]
    if not text.isascii():
        return cut_text, utf8_len(cut_text)
    # An ASCII text's kept head and tail are a byte a character.
    return cut_text, head + utf8_len(added) + len(text) - tail


def cut_around(text: str, content_bytes: int, marker: str) -> str:
    """``text`` cut to ``content_bytes`` UTF-8 bytes around ``marker``: a 75 % head and a 25 %
    tail on character boundaries, as §2.2 cuts (without its salient lines)."""
    head, tail = _Cut(text).split(max(0, content_bytes))
    return text[:head] + marker + text[tail:]


class _Cut:
    """Where a head of 75 % and a tail of 25 % of a byte budget end, as character offsets."""

    __slots__ = ("_raw", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._raw = None if text.isascii() else text.encode("utf-8")

    def split(self, content_bytes: int) -> tuple[int, int]:
        """``(head end, tail start)``: ``text[:head]`` and ``text[tail:]`` are what is kept."""
        head_budget = content_bytes * _HEAD_PERCENT // 100
        raw = self._raw
        if raw is None:
            head = min(head_budget, len(self._text))
            return head, len(self._text) - (content_bytes - head)
        head_end = head_budget
        # Back off to a character boundary: never split a multi-byte sequence (10xxxxxx = inside).
        while head_end > 0 and (raw[head_end] & 0xC0) == 0x80:
            head_end -= 1
        tail_start = len(raw) - (content_bytes - head_end)
        while tail_start < len(raw) and (raw[tail_start] & 0xC0) == 0x80:
            tail_start += 1
        return len(raw[:head_end].decode("utf-8")), len(self._text) - len(
            raw[tail_start:].decode("utf-8")
        )
