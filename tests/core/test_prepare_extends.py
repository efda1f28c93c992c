"""``prepare(..., extends=earlier)`` (a turn's next model call lends it the previous call's
result) gives exactly what ``prepare`` gives from scratch, whatever changed in between, leaves
the earlier result as it was, and builds only what is new."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from app.core.capabilities import ModelCapabilities
from app.core.content import Block, Item
from app.core.counting import ESTIMATE, CounterWrapper, TokenCounter
from app.core.errors import InvalidInput
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import PreparedModelCall, PruningWatermark
from tests.core.factories import assistant, call, part, tool, tool_def, user
from tests.core.test_prepare_equivalence import (
    CAPABILITIES,
    FAST,
    WATERMARKS,
    FramingCounter,
    conversations,
)

SYSTEM = [part("core/agent-system", "agent ü"), part("rules", "be brief")]
TOOLS = [tool_def("read"), tool_def("bash")]


def prepared(
    items: list[Item],
    caps: ModelCapabilities,
    pruning: PruningWatermark,
    counter: TokenCounter,
    extends: PreparedModelCall | None = None,
) -> PreparedModelCall | str:
    try:
        return prepare(SYSTEM, items, TOOLS, caps, pruning, counter, extends=extends)
    except InvalidInput as error:
        return error.code


def state(call: PreparedModelCall | None) -> Any:
    """What a call's result holds (its counter aside: a copy of it is another counter)."""
    if call is None:
        return None
    return call.request, call.budget, call.projection, call.items, call.measures


@FAST
@given(
    conversations(),
    st.lists(st.tuples(st.integers(0, 40), CAPABILITIES, WATERMARKS), min_size=1, max_size=6),
    st.sampled_from([ESTIMATE, FramingCounter()]),
)
def test_a_call_on_an_earlier_one_is_the_call_from_scratch(
    items: list[Item],
    calls: list[tuple[int, ModelCapabilities, PruningWatermark]],
    counter: TokenCounter,
) -> None:
    earlier: PreparedModelCall | None = None
    for length, caps, pruning in calls:  # a conversation that grows, shrinks, is pruned ...
        conversation = items[: min(length, len(items))]
        kept = copy.deepcopy(state(earlier))
        fresh = prepared(conversation, caps, pruning, counter)
        extended = prepared(conversation, caps, pruning, counter, earlier)
        assert extended == fresh
        assert state(earlier) == kept, "the earlier call's result was changed"
        earlier = extended if isinstance(extended, PreparedModelCall) else earlier


class Counting(CounterWrapper):
    """Counts the messages the budget measures (those without a figure of their own)."""

    def __init__(self, inner: TokenCounter) -> None:
        super().__init__(inner)
        self.measured = 0

    def measure_message(self, role: str, content: Sequence[Block]) -> int:
        self.measured += 1
        return self.inner.measure_message(role, content)


def exchange(i: int) -> list[Item]:
    seq = 3 * i
    return [
        user(f"request {i}", mid=f"u{i}", seq=seq + 1),
        assistant("", call(f"c{i}"), mid=f"a{i}", seq=seq + 2),
        tool(f"c{i}", f"result {i}", mid=f"t{i}", seq=seq + 3),
    ]


def test_only_the_new_messages_are_measured_and_only_by_the_same_counter() -> None:
    caps = ModelCapabilities(1_000_000, 4_000)
    counter = Counting(ESTIMATE)
    conversation = [item for i in range(4) for item in exchange(i)]
    first = prepare(SYSTEM, conversation, TOOLS, caps, counter=counter)
    assert counter.measured == 12
    counter.measured = 0
    longer = [*conversation, *exchange(4)]
    second = prepare(SYSTEM, longer, TOOLS, caps, counter=counter, extends=first)
    assert counter.measured == 3
    assert second == prepare(SYSTEM, longer, TOOLS, caps, counter=counter)
    # Another counter (even one measuring alike) takes nothing: its figures may differ.
    other = Counting(ESTIMATE)
    prepare(SYSTEM, longer, TOOLS, caps, counter=other, extends=first)
    assert other.measured == 15
    # The same objects as new items (a fresh read): nothing shared, all measured again.
    counter.measured = 0
    copies = [Item(i.role, i.kind, i.content, i.origin) for i in longer]
    prepare(SYSTEM, copies, TOOLS, caps, counter=counter, extends=second)
    assert counter.measured == 15
