"""Budget and limits of a prepared call (spec §3.1, §3.2), with the worked numbers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from app.core.capabilities import ModelCapabilities
from app.core.content import Block, CachedMeasure, Item, RealOrigin, text_block
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import PruningWatermark, SystemPart
from tests.core.factories import assistant, call, part, tool, tool_def, user
from tests.core.measure import json_bytes, text_of_tokens, user_of_tokens


def test_window_200000_output_32000() -> None:
    prepared = prepare([part("a", "agent")], [], [], ModelCapabilities(200_000, 32_000))
    assert prepared.budget.effective_input_tokens == 168_000
    assert prepared.budget.auto_compact_token_limit == 142_800
    assert prepared.budget.input_budget == 168_000


def test_the_worked_example_424_triggers_at_510() -> None:
    system = [part("core/agent", "agent"), part("core/project", "project")]
    prepared = prepare(system, [user("u" * 1600)], [], ModelCapabilities(1000, 400))
    budget = prepared.budget
    assert (budget.system_context_tokens, budget.conversation_tokens) == (17, 407)
    assert budget.estimated_input_tokens == 424
    assert budget.estimated_input_tokens < budget.effective_input_tokens == 600
    assert budget.auto_compact_token_limit == 510
    assert budget.reaches_auto_compact_limit is True
    assert budget.reserved_output_tokens == 400
    assert budget.dynamic_budget == 600 - 17


@pytest.mark.parametrize(("input_tokens", "triggers"), [(110, True), (109, False)])
def test_equality_with_the_trigger_line_triggers(input_tokens: int, triggers: bool) -> None:
    # Window 1000, output 400: line min(510, 600) = 510 = input + 400.
    prepared = prepare([], [user_of_tokens(input_tokens)], [], ModelCapabilities(1000, 400))
    assert prepared.budget.estimated_input_tokens == input_tokens
    assert prepared.budget.reaches_auto_compact_limit is triggers


def keel_tools(tokens: int) -> list[Any]:
    """A one-tool schema that measures exactly ``tokens`` (4·tokens bytes)."""
    definition: dict[str, Any] = {"name": "r", "description": "", "input_schema": {}}
    definition["description"] = "d" * (4 * tokens - json_bytes([definition]))
    return [definition]


def test_keel_plan_input_and_dynamic_budget() -> None:
    caps = ModelCapabilities(220, 50, safety_margin_tokens=12)
    system = [SystemPart("agent", [text_block(text_of_tokens(16))])]
    prepared = prepare(system, [], keel_tools(15), caps)
    budget = prepared.budget
    assert budget.input_budget == 158
    assert (budget.system_context_tokens, budget.tool_surface_tokens) == (16, 15)
    assert budget.dynamic_budget == 127
    assert budget.dynamic_budget_exhausted is False


def test_a_negative_dynamic_budget_is_reported_as_exhausted() -> None:
    caps = ModelCapabilities(220, 50, safety_margin_tokens=12)
    system = [SystemPart("agent", [text_block(text_of_tokens(100))])]
    budget = prepare(system, [], keel_tools(59), caps).budget
    assert budget.dynamic_budget == 158 - 159
    assert budget.dynamic_budget_exhausted is True


def test_no_tools_measure_zero() -> None:
    budget = prepare([part("a", "agent")], [], [], ModelCapabilities(1000, 400)).budget
    assert budget.tool_surface_tokens == 0


def test_regions_round_once_over_summed_bytes() -> None:
    # Two 5-byte-over messages: per-message rounding would say 2 + 2, the region says 3.
    items = [user("a" * 2), user("b" * 2)]  # 29 bytes each → 58 bytes → 15 tokens
    budget = prepare([], items, [], ModelCapabilities(1000, 400)).budget
    assert budget.conversation_tokens == 15


def test_artifacts_are_neither_sent_nor_counted() -> None:
    artifacts = [{"kind": "file_change", "payload": {"path": "a.py", "afterContent": "x" * 4000}}]
    with_artifacts = [assistant("", call("c1")), tool("c1", "ok", artifacts=artifacts)]
    without = [assistant("", call("c1")), tool("c1", "ok")]
    caps = ModelCapabilities(10_000, 400)
    a = prepare([], with_artifacts, [], caps)
    b = prepare([], without, [], caps)
    assert a.budget == b.budget
    assert a.request == b.request
    assert "artifacts" not in a.request["messages"][1]["content"][0]
    assert a.items[1] is with_artifacts[1]  # the caller's item, artifacts and all


def cached_user(measure: int, counter: str = "estimate", mid: str = "m1") -> Item:
    return Item(
        "user", "normal", [text_block("hi")], RealOrigin(mid, 1), CachedMeasure(counter, measure)
    )


def test_an_unchanged_item_uses_its_cached_measure() -> None:
    # The cached figure is deliberately wrong (the text is 29 bytes): seeing it proves reuse.
    budget = prepare([], [cached_user(4000)], [], ModelCapabilities(10_000, 400)).budget
    assert budget.conversation_tokens == 1000


def test_a_cached_measure_of_another_counter_is_ignored() -> None:
    budget = prepare(
        [], [cached_user(4000, "tiktoken:o200k_base")], [], ModelCapabilities(10_000, 400)
    ).budget
    assert budget.conversation_tokens == 8  # ceil(29 / 4)


def test_a_pruned_item_is_measured_as_sent_not_from_its_cache() -> None:
    text = "x" * 9000
    content: list[Block] = [
        {
            "type": "tool_result",
            "id": "c1",
            "name": "read",
            "output": [text_block(text)],
            "state": "success",
        }
    ]
    stale = Item("tool", "normal", content, RealOrigin("m2", 2), CachedMeasure("estimate", 4))
    items = [assistant("", call("c1"), mid="m1", seq=1), stale]
    prepared = prepare([], items, [], ModelCapabilities(10_000, 400), PruningWatermark(2))
    sent = prepared.request["messages"][1]["content"]
    assert prepared.projection.pruned_tool_results == 1
    expected = -(-(json_bytes(prepared.request["messages"][0]["content"]) + json_bytes(sent)) // 4)
    assert prepared.budget.conversation_tokens == expected


def test_an_equal_but_not_identical_item_is_measured() -> None:
    # Stages copy on write, so only the caller's own objects may carry a valid cache.
    renamed = Item(
        "tool",
        "normal",
        [
            {
                "type": "tool_result",
                "id": "c1",
                "name": "old",
                "output": [text_block("o")],
                "state": "success",
            }
        ],
        RealOrigin("m2", 2),
        CachedMeasure("estimate", 4000),
    )
    prepared = prepare(
        [], [assistant("", call("c1", "new")), renamed], [], ModelCapabilities(10_000, 400)
    )
    assert prepared.request["messages"][1]["content"][0]["name"] == "new"
    assert prepared.budget.conversation_tokens < 100


class FramingCounter:
    """An exact-style counter: 1 token per byte, 3 tokens framing per message and per request."""

    name = "framing"
    request_overhead_tokens = 3

    def measure_content(self, content: Sequence[Block]) -> int:
        return json_bytes(list(content))

    def measure_message(self, role: str, content: Sequence[Block]) -> int:
        return self.frame_message(role, self.measure_content(content))

    def frame_message(self, role: str, content_measure: int) -> int:
        return content_measure + 3

    def measure_tools(self, tools: Sequence[Any]) -> int:
        return json_bytes(list(tools)) if tools else 0

    def tokens(self, total_measure: int) -> int:
        return total_measure


def test_another_counter_is_applied_per_region_and_named() -> None:
    items = [user("hello")]
    budget = prepare(
        [part("a", "agent")],
        items,
        [tool_def("read")],
        ModelCapabilities(10_000, 400),
        counter=FramingCounter(),
    ).budget
    assert budget.counter == "framing"
    # Every region's messages are framed by the same rule: a system part as a message.
    assert budget.system_context_tokens == json_bytes([text_block("agent")]) + 3
    assert budget.conversation_tokens == json_bytes(items[0].content) + 3 + 3
    assert budget.tool_surface_tokens == json_bytes([tool_def("read")])


# ----- each message's share of the Conversation region (provenance ``tokens``) -------------


def shares_of(items: list[Item], counter: Any = None) -> list[int]:
    kwargs = {} if counter is None else {"counter": counter}
    prepared = prepare([], items, [], ModelCapabilities(10_000, 400), **kwargs)
    shares = [p["tokens"] for p in prepared.provenance]
    assert sum(shares) == prepared.budget.conversation_tokens
    return shares


def test_estimate_shares_round_the_running_total_so_they_add_up() -> None:
    # 29 bytes each (text 2 characters): running totals 29, 58, 87 bytes → 8, 15, 22 tokens.
    # Rounding each message on its own would say 8 + 8 + 8 = 24, one more than the region.
    items = [user("a" * 2), user("b" * 2), user("c" * 2)]
    assert shares_of(items) == [8, 7, 7]


def test_a_message_that_fits_in_the_rounding_before_it_shares_nothing() -> None:
    # 29 bytes → 8 tokens (32 bytes' worth); an empty assistant message, `[]`, is 2 more bytes.
    items = [user("a" * 2), Item("assistant", "normal", [])]
    assert shares_of(items) == [8, 0]
    assert shares_of([*items, user("b" * 2)]) == [8, 0, 7]  # 60 bytes → 15 tokens


def test_exact_counter_shares_are_each_messages_tokens_with_the_priming_in_the_first() -> None:
    items = [user("hello"), user("again")]
    per_message = [json_bytes(i.content) + 3 for i in items]
    assert shares_of(items, FramingCounter()) == [per_message[0] + 3, per_message[1]]


def test_no_message_no_share_and_the_region_is_the_priming_alone() -> None:
    prepared = prepare([], [], [], ModelCapabilities(10_000, 400), counter=FramingCounter())
    assert prepared.provenance == []
    assert prepared.budget.conversation_tokens == 3


def test_an_earlier_share_never_changes_when_messages_are_appended() -> None:
    items = [user("x" * n) for n in (1, 2, 3, 5, 8, 13)]
    for counter in (None, FramingCounter()):
        full = shares_of(items, counter)
        for n in range(1, len(items)):
            assert shares_of(items[:n], counter) == full[:n]
