"""Pruning old tool results (spec §2.1)."""

from __future__ import annotations

import pytest

from app.core.content import Item, SyntheticOrigin
from app.core.pipeline.prepared_call import PruningWatermark
from app.core.pipeline.prune import prune_tool_results, spill_file_name
from tests.core.factories import data_block, result_text, tool

WATERMARK = PruningWatermark(through_sequence=10)


def distinct_text(n: int) -> str:
    """``n`` characters where head and tail are distinguishable."""
    return "".join(chr(ord("a") + (i % 26)) for i in range(n))


def test_a_17000_character_result_keeps_head_marker_and_tail() -> None:
    text = distinct_text(17_000)
    [item] = prune_tool_results([tool("c1", text, seq=3)], WATERMARK).items
    assert result_text(item) == (
        text[:4096] + "\n... [tool result pruned: 11880 characters omitted]\n" + text[-1024:]
    )


@pytest.mark.parametrize(("length", "pruned"), [(8192, False), (8193, True)])
def test_only_results_over_8192_characters_are_pruned(length: int, pruned: bool) -> None:
    original = tool("c1", "x" * length, seq=1)
    result = prune_tool_results([original], WATERMARK)
    assert (result.items[0] is not original) is pruned
    assert result.pruned_tool_results == int(pruned)
    if pruned:
        assert f"{length - 5120} characters omitted" in result_text(result.items[0])


def test_characters_are_unicode_characters_not_bytes() -> None:
    text = "é" * 8192  # 16 384 bytes, but 8192 characters: not pruned
    original = tool("c1", text, seq=1)
    assert prune_tool_results([original], WATERMARK).items[0] is original
    longer = "界" * 9000
    [item] = prune_tool_results([tool("c1", longer, seq=1)], WATERMARK).items
    assert result_text(item).startswith("界" * 4096 + "\n... [tool result pruned: 3880 ")


def test_text_blocks_are_joined_with_newlines_and_data_blocks_kept() -> None:
    image = data_block()
    original = tool("c1", "a" * 5000, image, "b" * 5000, seq=2)
    [item] = prune_tool_results([original], WATERMARK).items
    block = item.content[0]
    assert block["type"] == "tool_result"
    kinds = [b["type"] for b in block["output"]]
    assert kinds == ["text", "data"]
    assert block["output"][1] == image
    first = block["output"][0]
    assert first["type"] == "text"
    # 5000 + 1 (joining newline) + 5000 = 10 001 characters
    assert "4881 characters omitted" in first["text"]
    assert first["text"].endswith("b" * 1024)


def test_spill_directory_marker_names_the_sanitized_file() -> None:
    watermark = PruningWatermark(through_sequence=5, spill_directory="/var/spill/s1/")
    [item] = prune_tool_results([tool("call:1/ü.x", "z" * 9000, seq=5)], watermark).items
    assert (
        "\n... [tool result pruned: 3880 characters omitted. Full result at "
        "/var/spill/s1/call_1___x.524506c2ea4af97a.txt — read it if you still need it]\n"
    ) in result_text(item)


def test_spill_file_name_keeps_only_safe_characters() -> None:
    assert spill_file_name("toolu_01-AZaz09") == "toolu_01-AZaz09.txt"
    assert spill_file_name("a.b/c d\u00e9") == "a_b_c_d_.2c06e1384901e83a.txt"


def test_ids_that_sanitize_alike_get_files_of_their_own() -> None:
    assert len({spill_file_name(i) for i in ("a.b", "a/b", "a_b", "a b")}) == 4
    assert spill_file_name("a_b") == "a_b.txt"
    assert spill_file_name("a.b") == "a_b.2e7336dc8eba87ef.txt"


def test_a_null_watermark_prunes_nothing() -> None:
    items = [tool("c1", "x" * 20_000, seq=1)]
    result = prune_tool_results(items, PruningWatermark(through_sequence=None))
    assert result.items[0] is items[0]
    assert result.pruned_tool_results == 0


def test_only_real_tool_items_at_or_below_the_watermark_are_pruned() -> None:
    big = "x" * 9000
    at_line = tool("c1", big, seq=10)
    above = tool("c2", big, seq=11)
    live = tool("c3", big)  # no sequence yet: never pruned
    synthetic = Item(
        "tool", "normal", list(at_line.content), SyntheticOrigin("k1", "system_reminder")
    )
    result = prune_tool_results([at_line, above, live, synthetic], WATERMARK)
    assert result.items[0] is not at_line
    assert result.items[1:] == [above, live, synthetic]
    assert all(a is b for a, b in zip(result.items[1:], [above, live, synthetic], strict=True))
    assert result.pruned_tool_results == 1


def test_the_input_is_never_mutated_and_artifacts_are_kept() -> None:
    artifacts = [{"kind": "file_change", "payload": {"path": "a.py"}}]
    original = tool("c1", "q" * 9000, seq=1, artifacts=artifacts)
    snapshot = repr(original)
    [item] = prune_tool_results([original], WATERMARK).items
    assert repr(original) == snapshot
    block = item.content[0]
    assert block["type"] == "tool_result"
    assert block.get("artifacts") == artifacts
    assert list(block) == ["type", "id", "name", "output", "state", "artifacts"]
