"""The one-pass keyword search the service's salient-line memo carries (``salient_memo.py``).

The core looks for the salient lines of a cut text with a ``str.find`` pass per keyword (22
passes: ~65 % of a prepare of a conversation never seen, docs/performance.md); Rust's
aho-corasick crate (``ahocorasick-rs``) finds them all in one pass, with a SIMD prefilter, ~60x
faster on the bench's logs. The core stays standard-library only and keeps its own search as
the reference: this is handed to it (``app.core.pipeline.salient_search.KeywordFinder``), and
``tests/services/test_salient_finder.py`` checks that both find the same lines.
"""

from __future__ import annotations

import ahocorasick_rs

from app.core.pipeline.salient_search import FINDER_NEEDLES

__all__ = ["AhoCorasickFinder"]


class AhoCorasickFinder:
    """``KeywordFinder``: leftmost-first matches (what lets the prefilter run; the core tries the
    needles that may start inside a match), by bytes when the text is ASCII (offsets are then
    characters, and the crate's ``str`` entry, which maps byte offsets back to characters, is
    ~2.5x slower)."""

    __slots__ = ("_ascii", "_text")

    def __init__(self) -> None:
        leftmost = ahocorasick_rs.MatchKind.LeftmostFirst
        self._ascii = ahocorasick_rs.BytesAhoCorasick(
            [needle.encode("ascii") for needle in FINDER_NEEDLES], matchkind=leftmost
        )
        self._text = ahocorasick_rs.AhoCorasick(FINDER_NEEDLES, matchkind=leftmost)

    def __call__(self, low: str) -> list[tuple[int, int, int]] | None:
        if low.isascii():  # a flag of the string: no scan
            return self._ascii.find_matches_as_indexes(low.encode("ascii"))
        try:
            return self._text.find_matches_as_indexes(low)
        except UnicodeEncodeError:
            return None  # a lone surrogate (JSON may carry one): the core's own search
