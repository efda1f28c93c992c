"""Choosing a counter by name, and counting raw text with any counter."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from app import fastjson
from app.core.content import Block
from app.core.counting import ESTIMATE
from app.core.errors import InvalidInput
from app.providers.tokenizers import COUNTER_NAMES, TiktokenCounter, count_text, get_counter


@pytest.mark.parametrize("name", COUNTER_NAMES)
def test_every_listed_counter_loads_under_its_name(
    name: str, counters: dict[str, TiktokenCounter]
) -> None:
    assert get_counter(name).name == name


def test_estimate_is_the_core_default_measured_by_orjson() -> None:
    counter = get_counter("estimate")
    assert counter is fastjson.ESTIMATE
    assert counter.name == ESTIMATE.name
    content: list[Block] = [{"type": "text", "text": 'ünï 界 😀 \n"q"'}]
    assert counter.measure_content(content) == ESTIMATE.measure_content(content)


@pytest.mark.parametrize("name", ["", "tiktoken:p50k_base", "o200k_base", "ESTIMATE", "tiktoken:"])
def test_unknown_counter_is_refused(name: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        get_counter(name)
    assert caught.value.code == "unknown_token_counter"
    assert "tiktoken:o200k_base" in caught.value.detail  # says what would be accepted


def test_count_text_by_name_or_counter(counters: dict[str, TiktokenCounter]) -> None:
    text = "tiktoken is great!"
    assert count_text("tiktoken:o200k_base", text) == 6  # cookbook figure
    assert count_text(counters["o200k_base"], text) == 6


@pytest.mark.parametrize(
    ("text", "expected"), [("", 0), ("abcd", 1), ("abcde", 2), ("héllo", 2), ("日本語", 3)]
)
def test_count_text_estimate_is_utf8_bytes_over_four(text: str, expected: int) -> None:
    assert count_text("estimate", text) == expected
    assert count_text(ESTIMATE, text) == expected


class _WordCounter:
    """A counter of another kind: one token per whitespace-separated word of text blocks."""

    name = "words"
    request_overhead_tokens = 0

    def measure_content(self, content: Sequence[Block]) -> int:
        return sum(len(b["text"].split()) for b in content if b["type"] == "text")

    def measure_message(self, role: str, content: Sequence[Block]) -> int:
        return self.measure_content(content)

    def frame_message(self, role: str, content_measure: int) -> int:
        return content_measure

    def measure_tools(self, tools: Sequence[Any]) -> int:
        return 0

    def tokens(self, total_measure: int) -> int:
        return total_measure


def test_count_text_uses_any_other_counters_own_rule() -> None:
    assert count_text(_WordCounter(), "three little words") == 3
