"""The breakpoint rule (``app.core.caching.breakpoints``): which blocks are marked, and the cache
key."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.caching.breakpoints import (
    MAX_BREAKPOINTS,
    MIN_CACHEABLE_TOKENS,
    CachePlan,
    PrefixFigures,
    cache_key_of,
    plan_cache,
    plan_for,
    prefix_figures,
)
from app.core.capabilities import ModelCapabilities
from app.core.counting import ESTIMATE
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import PruningWatermark, SystemPart
from tests.core.factories import assistant, user

TOOL = {"name": "read", "description": "Read a file", "input_schema": {"type": "object"}}
MIN = MIN_CACHEABLE_TOKENS


def request(system: int, conversation: int, *, tools: bool = True) -> dict[str, Any]:
    messages = [{"role": "system", "content": [{"type": "text", "text": "s"}]}] * system
    messages += [{"role": "user", "content": [{"type": "text", "text": "u"}]}] * conversation
    return {"messages": messages, "tools": [TOOL] if tools else [], "max_output_tokens": 10}


def figures(tools: int, system: int, system_messages: int, tokens: list[int]) -> PrefixFigures:
    """Figures whose messages weigh ``tokens`` each (the estimate: 4 bytes a token)."""
    return PrefixFigures(
        through_tools=tools,
        through_system=tools + system,
        system_messages=system_messages,
        measures=[4 * t for t in tokens],
        counter=ESTIMATE,
    )


def plan(
    req: dict[str, Any],
    figs: PrefixFigures,
    stable_messages: int | None = None,
    anchor: int | None = None,
) -> CachePlan:
    result = plan_cache(
        req,
        figs,
        stable_messages=stable_messages,
        prompt_caching="auto",
        seed="s-1",
        anchor=anchor,
    )
    assert result is not None
    return result


def test_all_four_breakpoints_when_every_prefix_is_long_enough() -> None:
    req = request(2, 6)
    result = plan(req, figures(MIN, 10, 2, [100] * 6), stable_messages=5)
    assert (result.mark_tools, result.mark_system) == (True, True)
    # The previous call's last message (index 4), then this call's last (index 7).
    assert result.message_breakpoints == (4, 7)
    assert result.mark_tools + result.mark_system + len(result.message_breakpoints) == (
        MAX_BREAKPOINTS
    )


def test_a_prefix_under_the_minimum_is_not_marked() -> None:
    # Tools alone: 1023 tokens; with the system 1033; the first message reaches 1043.
    result = plan(request(1, 3), figures(MIN - 1, 10, 1, [10, 10, 10]), stable_messages=2)
    assert result.mark_tools is False
    assert result.mark_system is True
    assert result.message_breakpoints == (1, 3)


def test_a_short_system_part_and_a_long_conversation_marks_only_the_conversation() -> None:
    result = plan(request(1, 2, tools=False), figures(0, 50, 1, [10, 2000]))
    assert (result.mark_tools, result.mark_system) == (False, False)
    assert result.message_breakpoints == (2,)


def test_a_short_request_has_no_breakpoint_but_still_a_key() -> None:
    result = plan(request(1, 1), figures(100, 100, 1, [100]))
    assert result == CachePlan(False, False, (), cache_key_of(request(1, 1), "s-1"))


def test_empty_tools_and_no_system_mark_neither() -> None:
    # The figures would allow it; there is nothing to mark.
    result = plan(request(0, 1, tools=False), figures(MIN, MIN, 0, [MIN]))
    assert (result.mark_tools, result.mark_system) == (False, False)
    assert result.message_breakpoints == (0,)


@pytest.mark.parametrize(
    ("stable_messages", "expected"),
    [
        (None, (3,)),
        (4, (3,)),  # the previous request ended at this one's last message: one breakpoint
        (5, (3,)),  # longer than this request: not a prefix, nothing more
        (3, (2, 3)),  # the previous request's end, or a break at message 3: 2 is still stable
        (2, (1, 3)),  # a break at message 2 (a pruned result): 1 is the last stable message
        (1, (3,)),  # ends in the system messages: covered by the system breakpoint
        (0, (3,)),
    ],
)
def test_the_stable_end_is_marked_only_when_it_lies_before_the_last_message(
    stable_messages: int | None, expected: tuple[int, ...]
) -> None:
    result = plan(request(1, 3), figures(MIN, 0, 1, [1, 1, 1]), stable_messages=stable_messages)
    assert result.message_breakpoints == expected


def test_no_conversation_marks_no_message() -> None:
    result = plan(request(2, 0), figures(MIN, MIN, 2, []), stable_messages=1)
    assert result.message_breakpoints == ()
    assert result.mark_system is True


def test_caching_off_is_no_plan() -> None:
    assert (
        plan_cache(
            request(1, 1),
            figures(MIN, MIN, 1, [MIN]),
            stable_messages=None,
            prompt_caching="off",
            seed="s-1",
        )
        is None
    )


def test_the_key_is_stable_per_session_and_names_no_id() -> None:
    req = request(1, 1)
    key = cache_key_of(req, "session-123")
    assert key == cache_key_of(request(3, 9), "session-123")
    assert key != cache_key_of(req, "session-124")
    assert key.startswith("ctxsvc-")
    assert len(key) == len("ctxsvc-") + 16
    assert "session-123" not in key


def test_the_stateless_key_follows_the_tools_and_the_system_only() -> None:
    base = request(1, 1)
    longer = request(1, 5)
    assert cache_key_of(base, None) == cache_key_of(longer, None)
    assert cache_key_of(base, None) != cache_key_of(request(2, 1), None)
    assert cache_key_of(base, None) != cache_key_of(request(1, 1, tools=False), None)


def test_figures_of_a_prepared_call_are_its_budget_in_provider_order() -> None:
    caps = ModelCapabilities(context_window_tokens=100_000, max_output_tokens=100)
    system = [SystemPart("agent", [{"type": "text", "text": "x" * 400}])]
    items = [user("a" * 3000), assistant("b" * 2000), user("c" * 41)]
    prepared = prepare(system, items, [TOOL], caps)  # type: ignore[list-item]
    figs = prefix_figures(prepared)
    budget = prepared.budget
    assert figs.through_tools == budget.tool_surface_tokens
    assert figs.through_system == budget.tool_surface_tokens + budget.system_context_tokens
    # The whole request is the budget's estimate (the estimate adds no request overhead).
    assert figs.through_message(3) == budget.estimated_input_tokens
    assert figs.through_message(0) == figs.through_system
    result = plan_for(prepared, prompt_caching="auto", seed="s", stable_messages=3)
    assert result is not None
    # The first message alone does not reach the minimum; with the second it does.
    assert figs.through_message(1) < MIN <= figs.through_message(2)
    assert result.message_breakpoints == (2, 3)
    assert plan_for(prepared, prompt_caching="off", seed="s", stable_messages=None) is None


def test_the_pruning_anchor_takes_a_free_slot() -> None:
    # Tools too short to mark: system, the anchor, the stable end and the last message.
    result = plan(request(1, 6), figures(10, MIN, 1, [100] * 6), stable_messages=6, anchor=2)
    assert (result.mark_tools, result.mark_system) == (False, True)
    assert result.message_breakpoints == (2, 5, 6)


def test_with_five_candidates_the_tool_breakpoint_gives_way_to_the_anchor() -> None:
    # The system breakpoint's prefix holds the tools: they stay cached through it.
    result = plan(request(1, 6), figures(MIN, 10, 1, [100] * 6), stable_messages=6, anchor=2)
    assert (result.mark_tools, result.mark_system) == (False, True)
    assert result.message_breakpoints == (2, 5, 6)
    assert len(result.message_breakpoints) + result.mark_system == MAX_BREAKPOINTS


@pytest.mark.parametrize(
    ("anchor", "expected"),
    [
        (None, (5, 6)),
        (5, (5, 6)),  # the stable end already: one breakpoint
        (6, (5, 6)),  # the last message already
        (0, (5, 6)),  # a system message: the system breakpoint covers it
    ],
)
def test_the_anchor_adds_nothing_where_another_breakpoint_is(
    anchor: int | None, expected: tuple[int, ...]
) -> None:
    result = plan(request(1, 6), figures(MIN, 10, 1, [100] * 6), stable_messages=6, anchor=anchor)
    assert result.message_breakpoints == expected
    assert result.mark_tools is True


def test_the_anchor_is_the_last_message_at_or_below_the_watermark() -> None:
    conversation = [
        user("read it", seq=1),
        assistant("reading", seq=2),
        user("and the other", seq=3),
        assistant("done", seq=4),
        user("thanks", seq=5),
    ]
    caps = ModelCapabilities(context_window_tokens=100_000, max_output_tokens=100)
    system = [SystemPart("core/agent-system", [{"type": "text", "text": "x" * 8 * MIN}])]
    prepared = prepare(system, conversation, [], caps, PruningWatermark(through_sequence=3))
    result = plan_for(prepared, prompt_caching="auto", seed="s", stable_messages=None)
    assert result is not None
    # Request messages: the system part, then sequences 1..5: sequence 3 is index 3.
    assert result.message_breakpoints == (3, 5)
