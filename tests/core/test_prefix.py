"""The stable prefix of a request against the previous one (``app.core.caching.prefix_record``):
its tokens
agree with the budget's own figures, and a break names the first message that differs and why."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from app.core.caching import prefix_comparison
from app.core.caching import prefix_record as prefix
from app.core.capabilities import ModelCapabilities
from app.core.content import Item, SyntheticOrigin, text_block
from app.core.counting import ESTIMATE
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import (
    PrefixBreak,
    PreparedModelCall,
    PruningWatermark,
    SystemPart,
)
from app.core.pipeline.prepared_call import ToolDefinition as Tool
from app.core.pipeline.provenance import token_shares
from tests.core.factories import assistant, call, part, tool, tool_def, user

CAPS = ModelCapabilities(200_000, 8_000)
SYSTEM = [part("core/agent-system", "You are careful."), part("project", "Repo notes.")]
TOOLS = [tool_def("read"), tool_def("grep")]
NO_PRUNING = PruningWatermark()
BIG = "z" * 9_000  # over the pruning threshold (8 192 characters)


def history(n: int = 6) -> list[Item]:
    items: list[Item] = []
    for i in range(n):
        seq = 3 * i
        items += [
            user(f"request {i}", mid=f"u{i}", seq=seq + 1),
            assistant("", call(f"c{i}"), mid=f"a{i}", seq=seq + 2),
            tool(f"c{i}", f"result {i} " + BIG * (i == 1), mid=f"t{i}", seq=seq + 3),
        ]
    return items


def prepared_with(
    conversation: Sequence[Item],
    previous: bytes | None,
    *,
    system: Sequence[SystemPart] = SYSTEM,
    tools: Sequence[Tool] = TOOLS,
    pruning: PruningWatermark = NO_PRUNING,
    identify_stored: bool = True,
    rewind: str | None = None,
) -> PreparedModelCall:
    prepared = prepare(system, conversation, tools, CAPS, pruning, ESTIMATE)
    record = prefix.record_request(
        prepared, conversation, identify_stored=identify_stored, rewind_compaction_id=rewind
    )
    comparison = prefix_comparison.compare(prepared, record, prefix.decode(previous))
    return prefix_comparison.with_prefix(prepared, record, comparison)


def record(prepared: PreparedModelCall) -> bytes:
    assert prepared.prefix_record is not None
    return prepared.prefix_record


def tokens_through(prepared: PreparedModelCall, messages: int) -> int:
    """The tokens of the tools and the first ``messages`` request messages, by the budget's
    regions (the Conversation's by provenance shares)."""
    budget = prepared.budget
    systems = len(prepared.request["messages"]) - len(prepared.items)
    assert messages >= systems
    shares = token_shares(prepared.measures, prepared.counter)
    return (
        budget.tool_surface_tokens
        + budget.system_context_tokens
        + sum(shares[: messages - systems])
    )


def test_without_a_previous_request_nothing_is_stable_and_nothing_breaks() -> None:
    prepared = prepared_with(history(), None)
    assert prepared.budget.stable_prefix_tokens == 0
    assert prepared.budget.prefix_break is None
    assert prepared.stable_messages is None


@pytest.mark.parametrize("identify_stored", [True, False])
@pytest.mark.parametrize("n", [0, 1, 6])
def test_the_same_request_again_is_all_prefix(n: int, identify_stored: bool) -> None:
    items = history(n)
    first = prepared_with(items, None, identify_stored=identify_stored)
    again = prepared_with(items, record(first), identify_stored=identify_stored)
    assert again.budget.stable_prefix_tokens == again.budget.estimated_input_tokens
    assert again.budget.prefix_break is None
    assert again.stable_messages == len(again.request["messages"])
    assert record(again) == record(first)


# Whole exchanges: a call cut from its result was sent with a synthesized interrupted result.
@pytest.mark.parametrize("cut", [0, 1, 3, 9, 18])
def test_appending_keeps_the_previous_request_as_the_prefix(cut: int) -> None:
    items = history()
    before = prepared_with(items[:cut], None)
    after = prepared_with(items, record(before))
    assert after.budget.prefix_break is None
    assert after.stable_messages == len(before.request["messages"])
    # Exactly the previous request's tokens: the shares of earlier messages never change.
    if cut:
        assert after.budget.stable_prefix_tokens == before.budget.estimated_input_tokens
    else:  # no message yet: the tools and the system parts
        budget = before.budget
        assert after.budget.stable_prefix_tokens == (
            budget.tool_surface_tokens + budget.system_context_tokens
        )


def test_a_stateless_record_compares_as_a_stored_one_does() -> None:
    items = history()
    for identify_stored in (True, False):
        before = prepared_with(items[:10], None, identify_stored=identify_stored)
        after = prepared_with(items, record(before), identify_stored=identify_stored)
        assert after.budget.stable_prefix_tokens == before.budget.estimated_input_tokens


def test_a_changed_tool_surface_breaks_at_zero() -> None:
    items = history()
    before = prepared_with(items, None)
    for tools in ([*TOOLS, tool_def("glob")], [], TOOLS[:1]):
        after = prepared_with(items, record(before), tools=tools)
        assert after.budget.prefix_break == PrefixBreak(0, "tools_changed")
        assert after.budget.stable_prefix_tokens == 0
        assert after.stable_messages == 0  # nothing of the request is stable
    # From no tools to some: the same.
    bare = prepared_with(items, None, tools=[])
    assert prepared_with(items, record(bare)).budget.prefix_break == PrefixBreak(0, "tools_changed")


def test_a_changed_system_part_breaks_at_its_message() -> None:
    items = history()
    before = prepared_with(items, None)
    changed = [SYSTEM[0], part("project", "Other notes.")]
    after = prepared_with(items, record(before), system=changed)
    assert after.budget.prefix_break == PrefixBreak(1, "system_changed")
    first_part = ESTIMATE.frame_message("system", ESTIMATE.measure_content(SYSTEM[0].content))
    assert after.budget.stable_prefix_tokens == (
        after.budget.tool_surface_tokens + ESTIMATE.tokens(first_part)
    )
    # One part fewer: the break is where the Conversation now starts.
    fewer = prepared_with(items, record(before), system=SYSTEM[:1])
    assert fewer.budget.prefix_break == PrefixBreak(1, "system_changed")


def test_pruning_breaks_at_the_pruned_result_and_keeps_what_comes_before() -> None:
    items = history()
    before = prepared_with(items, None)
    pruned = prepared_with(items, record(before), pruning=PruningWatermark(through_sequence=8))
    assert pruned.projection.pruned_tool_results == 1
    index = 2 + 5  # the second exchange's tool result, after the two system messages
    assert pruned.budget.prefix_break == PrefixBreak(index, "pruning")
    assert pruned.budget.stable_prefix_tokens == tokens_through(pruned, index)
    # The cache plan marks the end of what is still stable: the message before the break.
    assert pruned.stable_messages == index
    # Once pruned, it stays so: the next request extends this one.
    later = prepared_with(
        [*items, user("more", mid="u9", seq=99)],
        record(pruned),
        pruning=PruningWatermark(through_sequence=8),
    )
    assert later.budget.prefix_break is None
    assert later.budget.stable_prefix_tokens == pruned.budget.estimated_input_tokens


def compacted(compaction_id: str, summary: str, tail: Sequence[Item]) -> list[Item]:
    def synthetic(text: str, reason: str) -> Item:
        origin = SyntheticOrigin(compaction_id, reason)  # type: ignore[arg-type]
        return Item("user", "normal", [text_block(text)], origin)

    return [
        synthetic("request 5", "last_user_request_replay"),
        synthetic(summary, "compaction_summary"),
        synthetic("reminder", "system_reminder"),
        *tail,
    ]


def test_a_compaction_breaks_at_the_first_conversation_message() -> None:
    items = history()
    before = prepared_with(items, None)
    after = prepared_with(compacted("cp-1", "summary", items[-3:]), record(before))
    assert after.budget.prefix_break == PrefixBreak(2, "compaction")
    assert after.budget.stable_prefix_tokens == (
        after.budget.tool_surface_tokens + after.budget.system_context_tokens
    )
    # Another checkpoint (a later compaction): the summary differs, the reason is the same.
    again = prepared_with(compacted("cp-2", "summary 2", items[-3:]), record(after))
    assert again.budget.prefix_break == PrefixBreak(3, "compaction")


def test_a_rewind_is_a_changed_history_not_a_compaction() -> None:
    items = history()
    compaction = prepared_with(compacted("cp-2", "summary 2", items[-3:]), None)
    rewound = prepared_with(
        compacted("cp-3", "summary 1", items[-3:]), record(compaction), rewind="cp-3"
    )
    assert rewound.budget.prefix_break == PrefixBreak(3, "history_changed")
    # A compaction after the rewind is a compaction again.
    later = prepared_with(compacted("cp-4", "summary 4", items[-3:]), record(rewound))
    assert later.budget.prefix_break == PrefixBreak(3, "compaction")


def test_a_world_state_message_that_differs_names_world_state() -> None:
    items = history(2)
    notice = user("<sandbox_policy>a</sandbox_policy>", kind="world_state", mid="w1", seq=7)
    other = user("<sandbox_policy>b</sandbox_policy>", kind="world_state", mid="w2", seq=8)
    before = prepared_with([*items, notice], None)
    after = prepared_with([*items, other, user("next", mid="u9", seq=9)], record(before))
    assert after.budget.prefix_break == PrefixBreak(2 + 6, "world_state")
    assert after.budget.stable_prefix_tokens == tokens_through(after, 2 + 6)
    # Appended after the previous request, a World State message breaks nothing.
    appended = prepared_with([*items, notice, other], record(before))
    assert appended.budget.prefix_break is None


def test_a_synthesized_interrupted_result_replaced_by_the_real_one_is_a_changed_history() -> None:
    items = history()
    before = prepared_with(items[:5], None)  # the call of exchange 1 without its result
    after = prepared_with(items, record(before))
    assert after.budget.prefix_break == PrefixBreak(2 + 5, "history_changed")


def test_a_rewritten_or_removed_message_is_a_changed_history() -> None:
    items = history()
    before = prepared_with(items, None)
    rewritten = [*items[:4], user("request 1, reworded", mid="x", seq=50), *items[5:]]
    after = prepared_with(rewritten, record(before))
    assert after.budget.prefix_break == PrefixBreak(2 + 4, "history_changed")
    # Shorter than the previous request: the break is where this one ends.
    shorter = prepared_with(items[:9], record(before))
    assert shorter.budget.prefix_break == PrefixBreak(2 + 9, "history_changed")
    assert shorter.budget.stable_prefix_tokens == shorter.budget.estimated_input_tokens


def test_a_stored_message_is_identified_by_its_id_not_reserialized() -> None:
    items = history(2)
    before = prepared_with(items, None)
    # The same id with other content is the same stored message (stored content never
    # changes): the record did not look at its content.
    swapped = [replace(items[0], content=[text_block("not what was stored")]), *items[1:]]
    same_id = prepared_with(swapped, record(before))
    assert same_id.budget.prefix_break is None
    # Without stored ids (the stateless prepare) the content decides.
    before = prepared_with(items, None, identify_stored=False)
    by_content = prepared_with(swapped, record(before), identify_stored=False)
    assert by_content.budget.prefix_break == PrefixBreak(2, "history_changed")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"\x02\x00\x00\x00\x00\x00\x00\x00",  # another version
        b"\x01\x00\x00\x00\x00\x00\x00\x02" + b"\x00" * 9,  # fewer bytes than units
        b"\x01\x00\x00\x00\x00\x00\x00\x01" + b"\x00" * 8 + b"\xff",  # unknown kind
        b"\x01\x01\x00\x05\x00\x00\x00\x01" + b"\x00" * 8 + b"\x01",  # more parts than units
    ],
)
def test_a_record_that_does_not_decode_is_no_previous_request(data: bytes) -> None:
    assert prefix.decode(data) is None
    prepared = prepared_with(history(), data)
    assert (prepared.budget.stable_prefix_tokens, prepared.budget.prefix_break) == (0, None)


def test_the_digest_text_round_trips_and_refuses_anything_else() -> None:
    data = record(prepared_with(history(), None))
    digest = prefix.record_digest(data)
    assert digest.startswith("pc1.")
    assert prefix.digest_record(digest) == data
    for bad in ("", "pc1.", "pc2." + digest[4:], digest + "=", digest[:-1], digest + "!", "x"):
        assert prefix.digest_record(bad) is None
    assert prefix.digest_record("pc1." + "A" * prefix.MAX_DIGEST_CHARS) is None
