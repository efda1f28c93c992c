"""``bench/caching.py`` end to end on a short session, so the benchmark cannot rot: the real
service under uvicorn, the fake caching provider speaking Anthropic Messages and then OpenAI
Responses, a pruning and a compaction within 12 model calls each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import caching


def test_a_short_session_runs_and_reports_its_cache_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "figures.json"
    # Window 16 000: the 12 calls reach the pruning line (10 200 estimated tokens) and compact.
    both = caching.main(
        ["--calls", "12", "--calls-per-task", "5", "--window", "16000", "--json", str(out)]
    )
    printed = capsys.readouterr().out
    assert list(both) == ["anthropic_messages", "openai_responses"]
    for protocol, figures in both.items():
        assert figures.calls == 12, protocol
        assert figures.usage_matches, protocol  # the provider's figures reach the service's
        assert figures.cache_read_share > 0.5, protocol  # the prefix is kept and read
        assert figures.turns >= 2  # the tasks are 5 calls long (a compaction replays one)
        assert figures.prunings >= 1
        assert figures.compactions >= 1
        assert json.loads(out.read_text())[protocol]["calls"] == 12
        per_call = figures.per_call
        assert [c.call for c in per_call] == list(range(1, 13))
        assert figures.input_tokens == sum(c.total for c in per_call)
        read = sum(c.read for c in per_call)
        assert figures.cache_read_share == pytest.approx(read / figures.input_tokens)
        written = sum(c.written for c in per_call)
        cost = 0.1 * read + 1.25 * written + (figures.input_tokens - read - written)
        assert figures.relative_cost == pytest.approx(cost / figures.input_tokens)
    responses = both["openai_responses"]
    # OpenAI writes nothing billable and reports its cache in steps of 128 tokens.
    assert all(c.written == 0 and c.read % 128 == 0 for c in responses.per_call)
    assert responses.within_one_message is None  # items are not messages: not measured
    assert "read from cache:" in printed
    assert "cost relative to no caching:" in printed
    assert "== side by side: read from cache: anthropic_messages " in printed
