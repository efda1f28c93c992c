"""``bench/fidelity.py`` on one session of every shape compacted 5 times, so the benchmark
cannot rot and its issue-29 shapes keep every planted fact (the full run: 33 sessions, 100
compactions, figures in docs/performance.md)."""

from __future__ import annotations

import pytest

from bench import fidelity
from bench.fidelity_sessions import FACT_KINDS


def test_every_shape_keeps_its_facts_over_five_compactions(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The forged shape: a user message that imitates a summary (what an item is comes from its
    # stored origin).
    record = fidelity.main(["--per-shape", "1", "--rounds", "5", "--without-forged"])
    printed = capsys.readouterr().out
    assert record.missing == []
    for round_ in (1, 5):
        assert {kind for kind in FACT_KINDS if record.present[round_][kind]} == set(FACT_KINDS)
        assert all(all(found) for found in record.present[round_].values())
        assert record.unmarked[round_]  # replaced instructions were planted and checked
        assert not any(record.unmarked[round_])
    assert "MISSED" not in printed
    assert "replaced marked" in printed
