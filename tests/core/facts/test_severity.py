"""Log lines ranked by severity, distinct ones kept."""

from __future__ import annotations

import pytest

from app.core.facts import Severity, most_severe, severity


@pytest.mark.parametrize(
    ("line", "level"),
    [
        ("FATAL: ledger lock timeout after 30s on shard 7", Severity.FATAL),
        ("thread 'main' panicked at src/lib.rs:4", Severity.FATAL),
        ("Killed: OOMKilled", Severity.FATAL),
        ("ERROR ledger client: connection reset, retrying", Severity.ERROR),
        ("ValueError: bad amount", Severity.ERROR),
        ("WARN slow query 1.2 s", Severity.WARNING),
        ("Expected: 5", Severity.OTHER),
    ],
)
def test_levels(line: str, level: Severity) -> None:
    assert severity(line) is level


def test_the_fatal_line_after_29_retries_is_kept_and_retries_count_once() -> None:
    lines = [f"ERROR ledger client: connection reset, retrying (attempt {n})" for n in range(29)]
    lines.append("FATAL: ledger lock timeout after 30s on shard 7")
    assert most_severe(lines, 3) == [lines[0], lines[-1]]


def test_a_lasting_error_goes_before_a_transient_one_of_its_level() -> None:
    lines = ["ERROR a: retrying in 5 s", "WARN disk 91 %", "ERROR b: bad checksum"]
    assert most_severe(lines, 1) == ["ERROR b: bad checksum"]
    assert most_severe(lines, 2) == ["ERROR a: retrying in 5 s", "ERROR b: bad checksum"]


def test_at_most_keep_lines_in_their_original_order() -> None:
    lines = ["WARN w", "ERROR e", "FATAL f", "ERROR g"]
    assert most_severe(lines, 3) == ["ERROR e", "FATAL f", "ERROR g"]
    assert most_severe([], 3) == []
