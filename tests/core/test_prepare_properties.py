"""Property tests of normalize and prepare over random conversations (spec §2.3, §2.4, §3.1)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from app.core.capabilities import ModelCapabilities
from app.core.content import Block, Item, ToolCallBlock, compact_json
from app.core.counting import ESTIMATE, CounterWrapper, TokenCounter
from app.core.pipeline.normalize import normalize
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import PruningWatermark
from tests.core.factories import assistant, call, part, tool, tool_def, user
from tests.core.measure import remeasure

CAPS = ModelCapabilities(1_000_000, 4_000)
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Mostly short outputs, sometimes over the prune (8192 chars) or projection (32 000 bytes) line,
# one with a salient line in the part both cut.
OUTPUTS = st.sampled_from(
    ["ok", "ünï 界 😀", "x" * 9000, "y" * 33_000, "z\n" * 3000 + "error: x\n" + "z\n" * 14_000]
)

# One step of a history: ("user",), ("assistant", n_calls), ("tool", which_call, output)
STEP = st.one_of(
    st.tuples(st.just("user")),
    st.tuples(st.just("assistant"), st.integers(0, 3)),
    st.tuples(st.just("tool"), st.integers(0, 12), OUTPUTS),
)


def build(steps: list[tuple[Any, ...]]) -> list[Item]:
    """Turn steps into items; tool steps answer a random earlier call, or an unknown id."""
    items: list[Item] = []
    calls: list[str] = []
    for seq, step in enumerate(steps, start=1):
        mid = f"m{seq}"
        if step[0] == "user":
            items.append(user(f"request {seq}", mid=mid, seq=seq))
        elif step[0] == "assistant":
            new = [f"c{seq}_{k}" for k in range(step[1])]
            calls.extend(new)
            items.append(assistant(f"a{seq}", *(call(c) for c in new), mid=mid, seq=seq))
        else:
            call_id = calls[step[1]] if step[1] < len(calls) else f"unknown{step[1]}"
            items.append(tool(call_id, step[2], mid=mid, seq=seq))
    return items


HISTORIES = st.lists(STEP, max_size=25).map(build)


def tool_calls(item: Item) -> list[ToolCallBlock]:
    return [b for b in item.content if b["type"] == "tool_call"]


def result_ids(item: Item) -> list[str]:
    return [b["id"] for b in item.content if b["type"] == "tool_result"]


@FAST
@given(HISTORIES)
def test_every_call_gets_exactly_one_result_directly_after_it(items: list[Item]) -> None:
    out = normalize(items, accepts_data_blocks=True).items
    i = 0
    while i < len(out):
        item = out[i]
        assert item.role != "tool", "a tool message not consumed by an assistant survived"
        i += 1
        if item.role == "assistant":
            ids = [c["id"] for c in tool_calls(item)]
            following = out[i : i + len(ids)]
            assert [result_ids(t) for t in following] == [[c] for c in ids]
            assert all(t.role == "tool" for t in following)
            i += len(ids)


@FAST
@given(HISTORIES)
def test_normalizing_twice_changes_nothing(items: list[Item]) -> None:
    once = normalize(items, accepts_data_blocks=True)
    twice = normalize(once.items, accepts_data_blocks=True)
    assert all(a is b for a, b in zip(once.items, twice.items, strict=True))
    counts = (twice.synthesized_tool_results, twice.dropped_orphan_results)
    assert counts == (0, 0)


@FAST
@given(HISTORIES, st.none() | st.integers(0, 25))
def test_the_budget_measures_exactly_the_request(items: list[Item], through: int | None) -> None:
    system = [part("core/agent-system", "agent ü"), part("rules", "be brief")]
    tools = [tool_def("read"), tool_def("bash")]
    prepared = prepare(system, items, tools, CAPS, PruningWatermark(through))
    budget = prepared.budget
    regions = (budget.system_context_tokens, budget.conversation_tokens, budget.tool_surface_tokens)
    assert regions == remeasure(prepared.request, len(system))
    assert budget.estimated_input_tokens == sum(regions)


class ScaledCounter(CounterWrapper):
    """The estimate's measures with tokens scaled and rounded up, as calibration does."""

    def tokens(self, total_measure: int) -> int:
        return -(-self._inner.tokens(total_measure) * 13 // 10)


class FramingCounter(CounterWrapper):
    """Exact-style: bytes are tokens, 3 per message and 3 per request."""

    request_overhead_tokens = 3

    def measure_message(self, role: str, content: Sequence[Block]) -> int:
        return self._inner.measure_message(role, content) + 3

    def tokens(self, total_measure: int) -> int:
        return total_measure


@FAST
@given(
    HISTORIES, st.none() | st.integers(0, 25), st.sampled_from(["estimate", "scaled", "framing"])
)
def test_each_message_has_its_share_and_the_shares_add_up_to_the_region(
    items: list[Item], through: int | None, which: str
) -> None:
    counter: TokenCounter = {
        "estimate": ESTIMATE,
        "scaled": ScaledCounter(ESTIMATE),
        "framing": FramingCounter(ESTIMATE),
    }[which]
    prepared = prepare([part("a", "agent")], items, [], CAPS, PruningWatermark(through), counter)
    shares = [p["tokens"] for p in prepared.provenance]
    assert len(shares) == len(prepared.request["messages"]) - 1
    # With no message the region is the request's overhead alone (0 for the estimate).
    overhead = 0 if shares else counter.request_overhead_tokens
    assert sum(shares) + overhead == prepared.budget.conversation_tokens
    assert all(share >= 0 for share in shares)
    # The shares of the first k messages are the region figure of a request of those k alone.
    sent = prepared.request["messages"][1:]
    for k in range(1, len(sent) + 1):
        measure = sum(counter.measure_message(m["role"], m["content"]) for m in sent[:k])
        region = counter.tokens(measure) + counter.request_overhead_tokens
        assert sum(shares[:k]) == region


def last_assistant_is_answered(items: list[Item]) -> bool:
    """True when every call of the last assistant message has a result in its trailing run."""
    for index in range(len(items) - 1, -1, -1):
        if items[index].role == "assistant":
            answered = {i for t in items[index + 1 :] if t.role == "tool" for i in result_ids(t)}
            return {c["id"] for c in tool_calls(items[index])} <= answered
        if items[index].role != "tool":
            return True  # the trailing run belongs to nothing; no call is pending
    return True


@FAST
@given(HISTORIES, STEP)
def test_appending_a_message_keeps_the_previous_request_a_prefix(
    items: list[Item], step: tuple[Any, ...]
) -> None:
    extended = [*items, build_one(items, step)]
    if step[0] == "tool":
        # A new result may replace a synthesized one only while a call is still pending.
        assume(last_assistant_is_answered(items))
    system = [part("a", "agent")]
    before = prepare(system, items, [], CAPS)
    after = prepare(system, extended, [], CAPS)
    messages = before.request["messages"]
    assert compact_json(after.request["messages"][: len(messages)]) == compact_json(messages)
    # Every earlier message keeps its provenance, its token share included.
    assert after.provenance[: len(before.provenance)] == before.provenance


def build_one(items: list[Item], step: tuple[Any, ...]) -> Item:
    """The item ``step`` appends after ``items`` (ids and sequences continue after them)."""
    seq = len(items) + 1
    known = [c["id"] for item in items for c in tool_calls(item)]
    if step[0] == "user":
        return user("appended", mid=f"m{seq}", seq=seq)
    if step[0] == "assistant":
        return assistant("appended", *(call(f"n{seq}_{k}") for k in range(step[1])), mid=f"m{seq}")
    call_id = known[step[1]] if step[1] < len(known) else f"unknown{step[1]}"
    return tool(call_id, step[2], mid=f"m{seq}", seq=seq)
