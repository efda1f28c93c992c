"""Metric readings and CJK-aware sentences."""

from __future__ import annotations

from app.core.facts import Reading, readings, split_sentences


def test_readings_with_names_and_units() -> None:
    text = "error_rate 2.3 %, p99 latency: 340 ms, 当前错误率 0.1%, cpu.usage=0.93"
    assert readings(text) == [
        Reading("error_rate", "2.3 %"),
        Reading("p99 latency", "340 ms"),
        Reading("错误率", "0.1%"),
        Reading("cpu.usage", "0.93"),
    ]
    assert Reading("Error rate", "1 %").key == Reading("error_rate", "2 %").key


def test_counts_without_a_name_or_unit_are_not_readings() -> None:
    assert readings("handled request 12345 in 34 ms; shard 7; attempt = 3; 5 passed") == []


def test_cjk_sentences_end_without_whitespace() -> None:
    assert split_sentences("第一句。注意：不要修改 migration。第三句！Done. Next") == [
        "第一句。",
        "注意：不要修改 migration。",
        "第三句！",
        "Done.",
        "Next",
    ]
