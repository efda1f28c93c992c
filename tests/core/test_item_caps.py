"""Caps of authored items (spec §3.3): a count must be strictly below the cap."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from app.core.content import Block, text_block
from app.core.counting import ESTIMATE, TokenCounter
from app.core.errors import InvalidInput
from app.core.pipeline.item_caps import check_agent_message, check_skill_body, check_system_part
from tests.core.measure import text_of_tokens

Check = Callable[[str, Sequence[Block], TokenCounter], int]

CASES = [
    (check_system_part, 10_000, "system_context_part_too_large", "split the source file"),
    (check_skill_body, 8_000, "skill_too_large", "smaller skills"),
    (check_agent_message, 4_000, "agent_message_too_large", "report a summary"),
]


@pytest.mark.parametrize(("check", "cap", "code", "advice"), CASES)
def test_a_count_equal_to_the_cap_is_refused(
    check: Check, cap: int, code: str, advice: str
) -> None:
    with pytest.raises(InvalidInput) as info:
        check("the-item", [text_block(text_of_tokens(cap))], ESTIMATE)
    error = info.value
    assert error.code == code
    assert "the-item" in error.detail
    assert f"{cap} tokens" in error.detail
    assert f"{cap}-token cap" in error.detail
    assert advice in error.detail
    assert (error.extra["tokens"], error.extra["cap"]) == (cap, cap)


@pytest.mark.parametrize(("check", "cap", "code", "advice"), CASES)
def test_one_token_under_the_cap_is_accepted(
    check: Check, cap: int, code: str, advice: str
) -> None:
    assert check("the-item", [text_block(text_of_tokens(cap - 1))], ESTIMATE) == cap - 1


def test_the_count_is_the_counters_figure_of_the_content() -> None:
    class CharCounter:
        """Counts one token per character of text: a different counter, same rule."""

        name = "chars"
        request_overhead_tokens = 0

        def measure_content(self, content: Sequence[Block]) -> int:
            return sum(len(b["text"]) for b in content if b["type"] == "text")

        def measure_message(self, role: str, content: Sequence[Block]) -> int:
            return self.measure_content(content)

        def frame_message(self, role: str, content_measure: int) -> int:
            return content_measure

        def measure_tools(self, tools: Sequence[object]) -> int:
            return 0

        def tokens(self, total_measure: int) -> int:
            return total_measure

    assert check_agent_message("t", [text_block("x" * 3_999)], CharCounter()) == 3_999
    with pytest.raises(InvalidInput):
        check_agent_message("t", [text_block("x" * 4_000)], CharCounter())
