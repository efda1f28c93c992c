"""The composed prepare pipeline (spec §2.4): boundaries, errors, determinism, measurement."""

from __future__ import annotations

import copy
from dataclasses import asdict
from typing import Any, cast

import pytest

from app.core.capabilities import ModelCapabilities
from app.core.content import Item, RealOrigin, SyntheticOrigin, compact_json, text_block
from app.core.errors import InvalidInput
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import PreparedModelCall, PruningWatermark, SystemPart
from tests.core.factories import assistant, call, data_block, part, tool, tool_def, user
from tests.core.measure import remeasure, text_of_tokens

CAPS = ModelCapabilities(200_000, 32_000)


def realistic_history() -> tuple[list[SystemPart], list[Item], list[Any]]:
    system = [
        part("core/agent-system", "You are a careful agent."),
        part("core/rules", "Be brief."),
    ]
    items = [
        user("Fix the failing test, ünïcödé 界", mid="m1", seq=1),
        Item(
            "user",
            "world_state",
            [text_block("<sandbox_policy>\nmode: auto\n</sandbox_policy>")],
            RealOrigin("m2", 2),
        ),
        assistant(
            "Reading.", call("c1", "read", '{"path":"a.py"}'), call("c2", "bash"), mid="m3", seq=3
        ),
        tool("c1", "x" * 9000, name="read", mid="m4", seq=4),
        tool(
            "c2",
            "y" * 40_000,
            name="bash",
            mid="m5",
            seq=5,
            artifacts=[{"kind": "file_change", "payload": {"path": "a.py"}}],
        ),
        assistant("Now the second step.", call("c3", "grep"), mid="m6", seq=6),
        user("and?", mid="m7", seq=7),
    ]
    tools = [tool_def("read"), tool_def("bash"), tool_def("grep")]
    return system, items, tools


def prepared_bytes(prepared: PreparedModelCall) -> str:
    return compact_json(
        {
            "request": prepared.request,
            "budget": asdict(prepared.budget),
            "projection": asdict(prepared.projection),
            "provenance": prepared.provenance,
        }
    )


def run() -> PreparedModelCall:
    system, items, tools = realistic_history()
    return prepare(system, items, tools, CAPS, PruningWatermark(4))


def test_regions_enter_the_request_at_fixed_boundaries() -> None:
    prepared = run()
    messages = prepared.request["messages"]
    assert [m["role"] for m in messages] == [
        "system",
        "system",
        "user",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "tool",
        "user",
    ]
    # System parts in input order, not sorted.
    assert messages[0]["content"] == [text_block("You are a careful agent.")]
    assert messages[1]["content"] == [text_block("Be brief.")]
    assert prepared.request["tools"] == [tool_def("read"), tool_def("bash"), tool_def("grep")]
    assert prepared.request["max_output_tokens"] == 32_000
    # Provider independent: no sampling or reasoning parameters are set here.
    assert set(prepared.request) == {"messages", "tools", "max_output_tokens"}


def test_projection_report_and_provenance() -> None:
    prepared = run()
    assert asdict(prepared.projection) == {
        "pruned_tool_results": 1,
        "truncated_tool_results": 1,
        "original_tokens": 10_000,
        "projected_tokens": 8000,
        "synthesized_tool_results": 1,
        "dropped_orphan_results": 0,
        "filtered_data_blocks": 0,
    }
    provenance = [{k: v for k, v in p.items() if k != "tokens"} for p in prepared.provenance]
    assert provenance == [
        {"type": "persisted", "message_id": "m1", "sequence": 1},
        {"type": "persisted", "message_id": "m2", "sequence": 2},
        {"type": "persisted", "message_id": "m3", "sequence": 3},
        {"type": "persisted", "message_id": "m4", "sequence": 4},
        {"type": "persisted", "message_id": "m5", "sequence": 5},
        {"type": "persisted", "message_id": "m6", "sequence": 6},
        {"type": "synthesized", "reason": "interrupted_tool_result"},
        {"type": "persisted", "message_id": "m7", "sequence": 7},
    ]
    assert sum(p["tokens"] for p in prepared.provenance) == prepared.budget.conversation_tokens
    assert len(prepared.items) == len(prepared.request["messages"]) - 2


@pytest.mark.parametrize(
    "reason", ["last_user_request_replay", "compaction_summary", "system_reminder"]
)
def test_compaction_items_are_synthesized_with_their_reason(reason: Any) -> None:
    item = Item("user", "normal", [text_block("q")], SyntheticOrigin("k1", reason, "m1", 1))
    prepared = prepare([], [item], [], CAPS)
    assert prepared.provenance == [
        {"type": "synthesized", "reason": reason, "tokens": prepared.budget.conversation_tokens}
    ]


def test_an_item_the_caller_gave_no_id_is_provided_not_synthesized() -> None:
    live = user("live")  # no message id: a caller's item, not one the service made
    with_sequence_only = Item("user", "normal", [text_block("s")], RealOrigin(None, 4))
    with_id_only = Item("user", "normal", [text_block("i")], RealOrigin("m9"))
    prepared = prepare([], [live, with_sequence_only, with_id_only], [], CAPS)
    assert [{k: v for k, v in p.items() if k != "tokens"} for p in prepared.provenance] == [
        {"type": "provided"},
        {"type": "provided"},
        {"type": "persisted", "message_id": "m9", "sequence": None},
    ]


def test_the_estimate_equals_a_re_measurement_of_the_prepared_request() -> None:
    prepared = run()
    system, conversation, tools = remeasure(prepared.request, 2)
    budget = prepared.budget
    assert (
        budget.system_context_tokens,
        budget.conversation_tokens,
        budget.tool_surface_tokens,
    ) == (
        system,
        conversation,
        tools,
    )
    assert budget.estimated_input_tokens == system + conversation + tools


def test_two_preparations_of_the_same_input_are_byte_identical() -> None:
    assert prepared_bytes(run()) == prepared_bytes(run())


def test_tool_order_is_stable_and_as_given() -> None:
    first, second = run(), run()
    names = [t["name"] for t in first.request["tools"]]
    assert names == ["read", "bash", "grep"]
    assert compact_json(first.request["tools"]) == compact_json(second.request["tools"])


def test_the_input_is_never_mutated() -> None:
    system, items, tools = realistic_history()
    before = copy.deepcopy((system, items, tools))
    prepare(system, items, tools, CAPS, PruningWatermark(5, "/spill"))
    assert (system, items, tools) == before


def test_unchanged_items_are_handed_on_as_the_same_objects() -> None:
    system, items, tools = realistic_history()
    prepared = prepare(system, items, tools, CAPS, PruningWatermark(4))
    assert prepared.items[0] is items[0]
    assert prepared.items[2] is items[2]
    assert prepared.items[3] is not items[3]  # pruned
    assert prepared.items[4] is not items[4]  # projected


def test_appending_a_message_keeps_the_previous_request_as_a_prefix() -> None:
    system, items, tools = realistic_history()
    items = items[:5]  # the last assistant's calls all have results
    before = prepare(system, items, tools, CAPS, PruningWatermark(4)).request["messages"]
    after = prepare(
        system, [*items, user("next", mid="m9", seq=9)], tools, CAPS, PruningWatermark(4)
    )
    messages = after.request["messages"]
    assert compact_json(messages[: len(before)]) == compact_json(before)
    assert len(messages) == len(before) + 1


@pytest.mark.parametrize(
    ("system", "code"),
    [
        ([part("", "x")], "empty_system_context_key"),
        ([part("  ", "x")], "empty_system_context_key"),
        ([part("a", "x"), part("a", "y")], "duplicate_system_context_key"),
        ([SystemPart("a", [])], "empty_system_context_part"),
        ([part("a", " \n")], "empty_system_context_part"),
        ([part("big", text_of_tokens(10_000))], "system_context_part_too_large"),
    ],
)
def test_malformed_system_context_fails(system: list[SystemPart], code: str) -> None:
    with pytest.raises(InvalidInput) as info:
        prepare(system, [user("hi")], [], CAPS)
    assert info.value.code == code


def test_a_duplicate_key_fails_deterministically_naming_the_key() -> None:
    for _ in range(2):
        with pytest.raises(InvalidInput) as info:
            prepare([part("k", "a"), part("j", "b"), part("k", "c")], [], [], CAPS)
        assert "duplicate system context key: k" in info.value.detail


def test_a_system_part_one_token_under_the_cap_is_accepted() -> None:
    prepared = prepare([part("big", text_of_tokens(9_999))], [], [], CAPS)
    assert prepared.budget.system_context_tokens == 9_999


def test_a_too_large_system_part_names_key_count_and_cap() -> None:
    with pytest.raises(InvalidInput) as info:
        prepare([part("core/agent-system", text_of_tokens(10_001))], [], [], CAPS)
    assert "core/agent-system" in info.value.detail
    assert "10001 tokens" in info.value.detail
    assert "10000-token cap" in info.value.detail


def test_a_system_message_in_the_conversation_fails() -> None:
    system_item = Item(cast(Any, "system"), "normal", [text_block("obey")])
    with pytest.raises(InvalidInput) as info:
        prepare([part("a", "agent")], [user("hi"), system_item], [], CAPS)
    assert info.value.code == "system_message_in_conversation"
    assert info.value.extra["item_index"] == 1


def test_a_system_message_after_dropped_orphans_is_named_by_the_callers_index() -> None:
    # The index counts the dropped orphan, as ``data_blocks_not_accepted`` does: the caller's item.
    system_item = Item(cast(Any, "system"), "normal", [text_block("obey")])
    items = [tool("gone", "orphan"), user("hi"), system_item]
    with pytest.raises(InvalidInput) as info:
        prepare([part("a", "agent")], items, [], CAPS)
    assert info.value.extra["item_index"] == 2
    assert info.value.detail.startswith("conversation item 2 has role 'system'")


def test_a_resumed_walk_names_the_callers_index_too() -> None:
    # The first call remembers the walk of [orphan, user]; the second one carries on from it.
    system_item = Item(cast(Any, "system"), "normal", [text_block("obey")])
    items = [tool("gone", "orphan"), user("a"), user("b")]
    prepare([], items, [], CAPS)
    with pytest.raises(InvalidInput) as info:
        prepare([], [*items, system_item, user("c")], [], CAPS)
    assert info.value.extra["item_index"] == 3


def test_capabilities_are_validated_before_anything_else() -> None:
    bad = ModelCapabilities(1000, 1000, output_reserve_tokens=1000)
    with pytest.raises(InvalidInput) as info:
        prepare([part("", "")], [Item(cast(Any, "system"), "normal", [])], [], bad)
    assert info.value.code == "invalid_capabilities"


def test_data_blocks_refused_for_a_model_without_them_name_the_item() -> None:
    caps = ModelCapabilities(10_000, 400, accepts_data_blocks=False)
    items = [user("a"), Item("user", "normal", [data_block()], RealOrigin("m2", 2))]
    with pytest.raises(InvalidInput) as info:
        prepare([], items, [], caps)
    assert info.value.code == "data_blocks_not_accepted"
    assert info.value.extra["item_index"] == 1


def test_data_blocks_outside_user_requests_are_filtered_and_reported() -> None:
    caps = ModelCapabilities(10_000, 400, accepts_data_blocks=False)
    skill = Item("user", "skill_instruction", [text_block("<skill>"), data_block()])
    prepared = prepare([], [skill, user("go")], [], caps)
    assert prepared.projection.filtered_data_blocks == 1
    assert prepared.request["messages"][0]["content"] == [text_block("<skill>")]
