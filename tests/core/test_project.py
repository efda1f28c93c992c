"""Projecting oversized tool results (spec §2.2)."""

from __future__ import annotations

import math

import pytest

from app.core.content import DataBlock
from app.core.pipeline.project import _project_block, project_tool_results
from tests.core.factories import data_block, result_text, tool, user

BUDGET = 32_000


def marker(original_tokens: int) -> str:
    return (
        f"\n...[tool result truncated; original≈{original_tokens} tokens; projected=8000; "
        "continue with narrower reads]...\n"
    )


@pytest.mark.parametrize(("byte_count", "projected"), [(32_000, False), (32_001, True)])
def test_results_over_8000_tokens_are_projected(byte_count: int, projected: bool) -> None:
    original = tool("c1", "x" * byte_count)
    result = project_tool_results([original])
    assert (result.items[0] is not original) is projected
    assert result.truncated_tool_results == int(projected)
    if projected:
        assert result.original_tokens == 8001
        assert marker(8001) in result_text(result.items[0])


def test_multibyte_text_is_measured_in_bytes_not_characters() -> None:
    text = "é" * 16_001  # 16 001 characters but 32 002 bytes: 8001 tokens
    result = project_tool_results([tool("c1", text)])
    assert result.truncated_tool_results == 1
    assert result.original_tokens == 8001


def test_ascii_head_and_tail_split_the_budget_75_25() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(100_000))
    [item] = project_tool_results([tool("c1", text)]).items
    projected = result_text(item)
    mark = marker(25_000)
    head, tail = projected.split(mark)
    content = BUDGET - len(mark.encode())
    assert len(head) == content * 75 // 100
    assert len(head) + len(tail) == content
    assert text.startswith(head)
    assert text.endswith(tail)
    assert len(projected.encode()) == BUDGET


@pytest.mark.parametrize("char", ["€", "界", "😀", "é"])
def test_multibyte_cuts_fall_on_character_boundaries(char: str) -> None:
    text = ("ab" + char) * 20_000
    [item] = project_tool_results([tool("c1", text)]).items
    projected = result_text(item)
    original_tokens = math.ceil(len(text.encode()) / 4)
    head, tail = projected.split(marker(original_tokens))
    content = BUDGET - len(marker(original_tokens).encode())
    head_budget = content * 75 // 100
    width = len(char.encode())
    assert text.startswith(head)
    assert text.endswith(tail)
    # As much as fits: at most one character's bytes are given up at each cut.
    assert head_budget - width < len(head.encode()) <= head_budget
    assert BUDGET - width < len(projected.encode()) <= BUDGET


def test_data_blocks_are_replaced_by_one_notice_when_over_the_cap() -> None:
    big: DataBlock = {
        "type": "data",
        "source": {"source_type": "base64", "data": "A" * 40_000, "media_type": "image/png"},
        "name": "shot.png",
    }
    small = data_block(url="https://x.test/1.png", name=None)
    result = project_tool_results([tool("c1", "look", big, small)])
    [item] = result.items
    block = item.content[0]
    assert block["type"] == "tool_result"
    removed_bytes = 40_000 + 9 + 8 + len("https://x.test/1.png") + 9
    assert block["output"] == [
        {"type": "text", "text": "look"},
        {
            "type": "text",
            "text": f"[tool result omitted 2 data block(s), approximately {removed_bytes} "
            "bytes; the authoritative result remains unchanged]",
        },
    ]
    assert result.original_tokens == math.ceil((4 + removed_bytes) / 4)
    assert result.projected_tokens == math.ceil(len(result_text(item).encode()) / 4)


def test_id_name_state_and_artifacts_are_kept() -> None:
    artifacts = [{"kind": "file_change", "payload": {"path": "a"}}]
    original = tool("c9", "y" * 40_000, name="grep", artifacts=artifacts)
    [item] = project_tool_results([original]).items
    block = item.content[0]
    assert block["type"] == "tool_result"
    assert (block["id"], block["name"], block["state"]) == ("c9", "grep", "success")
    assert block.get("artifacts") == artifacts
    assert result_text(original) == "y" * 40_000  # the input is untouched


def test_several_text_blocks_are_concatenated_without_separator() -> None:
    result = project_tool_results([tool("c1", "a" * 20_000, "b" * 20_000)])
    block = result.items[0].content[0]
    assert block["type"] == "tool_result"
    assert len(block["output"]) == 1
    text = result_text(result.items[0])
    assert text.startswith("a" * 20_000)
    assert text.endswith("b" * 7_000)


def test_report_sums_over_truncated_results_only() -> None:
    items = [user("hi"), tool("c1", "s"), tool("c2", "x" * 40_000), tool("c3", "z" * 80_000)]
    result = project_tool_results(items)
    assert result.items[0] is items[0]
    assert result.items[1] is items[1]
    assert result.truncated_tool_results == 2
    assert result.original_tokens == 10_000 + 20_000
    assert result.projected_tokens == 2 * 8000


@pytest.mark.parametrize(
    "output",
    [
        ["x" * 40_000],  # ASCII, no salient line: the plain cut
        [("step ok\n" * 2_000 + "error: it broke\n") * 3],  # ASCII, salient lines in the cut
        ["é" * 20_000],  # not ASCII
        [("ok é\n" * 3_000 + "FAILED: test_x\n") * 3],  # not ASCII, salient lines
        [data_block("x" * 40_000)],  # a data block only: its notice, not cut
        ["y" * 33_000, data_block("x" * 40_000)],  # text and the notice, cut
    ],
)
def test_projected_tokens_are_the_bytes_of_what_is_sent(output: list[str | DataBlock]) -> None:
    # The projected figure is counted from the cut's pieces, not by encoding the cut text:
    # it must be what encoding what is sent gives.
    result = project_tool_results([tool("c1", *output)])
    assert result.truncated_tool_results == 1
    [block] = result.items[0].content
    assert block["type"] == "tool_result"
    sent = sum(len(b["text"].encode()) for b in block["output"] if b["type"] == "text")
    assert result.projected_tokens == math.ceil(sent / 4)
    # Byte for byte (the tokens round to 4 bytes): the block's own figure.
    [original] = tool("c1", *output).content
    assert original["type"] == "tool_result"
    assert _project_block(original, result.original_tokens, None) == (block, sent)
