"""The service's one-pass keyword search finds the lines the core's own search finds.

``app/services/salient_finder.py`` hands ``app/core/pipeline/salient_search.py`` an
Aho-Corasick automaton in place of its ``str.find`` passes; the lines found, their first match
and so the rendered sections must not change (spec §9). Random texts are built from the
keywords, their case variants, the characters that make or unmake a word, line breaks and the
near-misses the rule rejects.
"""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.core.pipeline.salient import SalientLineMemo, salient_lines, salient_section
from app.core.pipeline.salient_search import _KEYWORDS, FINDER_NEEDLES, first_matches
from app.services.salient_finder import AhoCorasickFinder
from app.services.salient_memo import SALIENT_LINES

FINDER = AhoCorasickFinder()


def every_occurrence(low: str) -> list[tuple[int, int, int]]:
    """A finder that lists every occurrence, overlapping ones too (what the contract also
    allows): the core must give the same lines from it."""
    found = []
    for index, needle in enumerate(FINDER_NEEDLES):
        at = low.find(needle)
        while at >= 0:
            found.append((at, index, at + len(needle)))
            at = low.find(needle, at + 1)
    return [(index, at, end) for at, index, end in sorted(found)]


_NEAR_MISSES = [
    "0 errors", "no failures", "failed: 0", "errors = 0", "without exceptions", "ValueError",
    "valueerror", "IOException", "E  ", "e  ", "E   x", " E  ", "ERR!", "err!", "Err!",
    "oomkilled", "OOMKilled", "xoomkilled", "non-zero exit", "xnon-zero exit code 1",
    "exit code 0", "exit code 2", "exit code", "exit status:", " code", "exited with status 1",
    "exit status: 137", "exit code -0",
    "Expected:", "expected:<5>", "received :", "actual:", "but was", "butwas", "terror",
    "errorreceived:", "failing", "fails_", "Traceback (most recent call last):",
    "Segmentation Fault", "core dumped", "Out of memory", "timed out", "No such file",
    "not found", "undefined reference", "panicked", "FATAL", "assertion", "aborted", "denied",
]  # fmt: skip
_PIECES = st.one_of(
    st.sampled_from(_KEYWORDS),
    st.sampled_from(_KEYWORDS).map(str.upper),
    st.sampled_from(_KEYWORDS).map(str.title),
    st.sampled_from(_NEAR_MISSES),
    st.sampled_from(["\n", "\n", " ", "  ", "_", "x", "1", ": ", "=", "<", "\r\n", "\t"]),
    st.sampled_from(["é", "İ", "ß", "\U0001f600", "K", "\ud800"]),  # non-ASCII; a lone surrogate
    st.text(max_size=6),
)
_TEXTS = st.lists(_PIECES, max_size=40).map("".join)
# Logs repeat their lines: a few lines, each used again and again (the finder's search looks at
# a line's text once; a keyword whose match runs on into the next line must not be trusted).
_REPEATS = (
    st.lists(st.lists(_PIECES, max_size=8).map("".join), min_size=1, max_size=4)
    .flatmap(lambda pool: st.lists(st.sampled_from(pool), max_size=24))
    .map("\n".join)
)


@settings(max_examples=3000, deadline=None)
@given(st.one_of(_TEXTS, _REPEATS))
# The same line, salient or not by the line after it (a status or a ``:`` there).
@example("exit code\n1\nexit code\nx")
@example("x\nexit code\nx\nexit code\n1")
@example("expected\n:\nexpected\nx")
@example("Actual\n: 1\nActual\nq")
def test_the_finder_finds_the_first_match_of_every_line_the_search_finds(text: str) -> None:
    expected = first_matches(text, 0, len(text))
    assert first_matches(text, 0, len(text), FINDER) == expected
    assert first_matches(text, 0, len(text), every_occurrence) == expected


@settings(max_examples=1000, deadline=None)
@given(st.one_of(_TEXTS, _REPEATS), st.data())
def test_salient_lines_and_sections_are_the_same_with_the_finder(
    text: str, data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, len(text)))
    stop = data.draw(st.integers(start, len(text)))
    plain = salient_lines(text, start, stop)
    fast = salient_lines(text, start, stop, memo=SalientLineMemo(FINDER))
    assert fast == plain
    assert salient_section(fast, 400) == salient_section(plain, 400)


def test_long_logs_give_the_same_lines() -> None:
    """A log in the bench's shape, long enough for the finder's prefilter to run."""
    lines = []
    for n in range(4000):
        lines.append(f'{{"id": {n}, "path": "src/mod_{n % 97}.py", "ok": true}}')
        if n % 37 == 0:
            lines.append(f"E   AssertionError: expected 1 == {n}")
        if n % 53 == 0:
            lines.append(f"npm ERR! code {n}; 0 errors; exit code {n % 3}")
    text = "\n".join(lines)
    assert first_matches(text, 0, len(text), FINDER) == first_matches(text, 0, len(text))


def test_the_service_memo_carries_the_finder() -> None:
    assert isinstance(SALIENT_LINES.finder, AhoCorasickFinder)
