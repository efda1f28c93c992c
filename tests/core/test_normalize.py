"""Pairing tool calls with results and filtering data blocks (spec §2.3)."""

from __future__ import annotations

import pytest

from app.core.content import Item, RealOrigin, compact_json, text_block
from app.core.errors import InvalidInput
from app.core.pipeline.normalize import INTERRUPTED_TEXT, normalize
from tests.core.factories import assistant, call, data_block, result_block, tool, user


def ids_and_states(items: list[Item]) -> list[tuple[str, str, str]]:
    out = []
    for item in items:
        for b in item.content:
            if b["type"] == "tool_result":
                out.append((b["id"], b["name"], b["state"]))
    return out


def test_a_complete_history_passes_through_as_the_same_objects() -> None:
    items = [user("go"), assistant("", call("c1"), call("c2")), tool("c1", "a"), tool("c2", "b")]
    result = normalize(items, accepts_data_blocks=True)
    assert all(a is b for a, b in zip(result.items, items, strict=True))
    assert (result.synthesized_tool_results, result.dropped_orphan_results) == (0, 0)


def test_results_are_reordered_into_call_order() -> None:
    items = [
        assistant("", call("c1"), call("c2"), call("c3")),
        tool("c3", "3"),
        tool("c1", "1"),
        tool("c2", "2"),
    ]
    result = normalize(items, accepts_data_blocks=True)
    assert [i.role for i in result.items] == ["assistant", "tool", "tool", "tool"]
    assert [s[0] for s in ids_and_states(result.items)] == ["c1", "c2", "c3"]


def test_missing_results_are_synthesized_in_call_order_with_the_call_id() -> None:
    items = [
        user("go"),
        assistant("", call("c1", "read"), call("c2", "bash"), call("c3", "grep")),
        tool("c2", "ok", name="bash"),
    ]
    result = normalize(items, accepts_data_blocks=True)
    assert ids_and_states(result.items) == [
        ("c1", "read", "interrupted"),
        ("c2", "bash", "success"),
        ("c3", "grep", "interrupted"),
    ]
    assert result.synthesized_tool_results == 2
    synthesized = result.items[2]
    assert synthesized.content == [
        {
            "type": "tool_result",
            "id": "c1",
            "name": "read",
            "output": [{"type": "text", "text": INTERRUPTED_TEXT}],
            "state": "interrupted",
        }
    ]
    assert INTERRUPTED_TEXT == (
        "Tool result unavailable: the previous turn ended before a durable result was recorded."
    )


def test_synthesizing_the_same_history_twice_gives_identical_bytes() -> None:
    def history() -> list[Item]:
        return [user("go"), assistant("x", call("c1"), call("c2")), user("again")]

    first = normalize(history(), accepts_data_blocks=True).items
    second = normalize(history(), accepts_data_blocks=True).items
    as_json = [compact_json(i.content) for i in first]
    assert as_json == [compact_json(i.content) for i in second]
    assert [i.role for i in first] == ["user", "assistant", "tool", "tool", "user"]


def test_orphans_duplicates_and_unknown_ids_are_dropped_and_counted() -> None:
    items = [
        tool("c0", "orphan before anything"),
        user("go"),
        assistant("", call("c1")),
        tool("c1", "first"),
        tool("c1", "duplicate"),
        tool("zz", "unknown"),
        user("next"),
        tool("c1", "late, separated by a user message"),
    ]
    result = normalize(items, accepts_data_blocks=True)
    assert [i.role for i in result.items] == ["user", "assistant", "tool", "user"]
    assert result.items[2] is items[3]
    assert result.dropped_orphan_results == 4
    assert result.synthesized_tool_results == 0


def test_a_result_separated_from_its_call_is_an_orphan_and_the_call_synthesized() -> None:
    items = [assistant("", call("c1")), user("interjection"), tool("c1", "too late")]
    result = normalize(items, accepts_data_blocks=True)
    assert ids_and_states(result.items) == [("c1", "read", "interrupted")]
    assert result.dropped_orphan_results == 1


def test_a_result_takes_the_name_of_its_call() -> None:
    original = tool("c1", "out", name="wrong")
    result = normalize([assistant("", call("c1", "bash")), original], accepts_data_blocks=True)
    assert ids_and_states(result.items) == [("c1", "bash", "success")]
    assert original.content == [result_block("c1", "out", name="wrong")]  # input untouched
    assert result.items[1].origin == original.origin


def test_data_blocks_in_a_real_user_request_fail_when_not_accepted() -> None:
    items = [
        user("hi"),
        assistant("ok"),
        Item("user", "normal", [text_block("see"), data_block()], RealOrigin("m3", 3)),
    ]
    with pytest.raises(InvalidInput) as info:
        normalize(items, accepts_data_blocks=False)
    assert info.value.code == "data_blocks_not_accepted"
    assert info.value.extra["item_index"] == 2
    assert "item 2" in info.value.detail


def test_data_blocks_elsewhere_are_removed_and_counted_when_not_accepted() -> None:
    skill = Item("user", "skill_instruction", [text_block("s"), data_block()])
    world = Item("user", "world_state", [data_block(), text_block("w")])
    result_item = Item("tool", "normal", [result_block("c1", "out", data_block(), data_block())])
    items = [skill, world, assistant("", call("c1")), result_item]
    result = normalize(items, accepts_data_blocks=False)
    assert result.filtered_data_blocks == 4
    assert '"type":"data"' not in compact_json([i.content for i in result.items])
    assert [b["type"] for b in result.items[0].content] == ["text"]
    assert result.items[3].content == [result_block("c1", "out")]
    assert len(skill.content) == 2  # the input is untouched


def test_data_blocks_are_kept_when_accepted() -> None:
    item = Item("user", "normal", [text_block("see"), data_block()])
    result = normalize([item], accepts_data_blocks=True)
    assert result.items[0] is item
    assert result.filtered_data_blocks == 0
