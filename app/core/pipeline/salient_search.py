"""Where the salient-line rule (``salient.py``) matches: the first match of each line of a text.

Every match of the rule starts with one of a few keywords, so the lowered text is searched for
the keywords and each place found is tested against the rule. The search is the whole of the
cost on a long log, and the standard library has no multi-keyword search: here it is one
``str.find`` pass per keyword (22 passes, ~0.2 ms each per 360 000 characters). A caller may
hand in a ``KeywordFinder`` that finds all the keywords in one pass (the service hands in an
Aho-Corasick automaton: ``app/services/salient_finder.py``); the lines found are the same either
way, and the search here stays the reference and the default.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Protocol

__all__ = ["FINDER_NEEDLES", "KeywordFinder", "first_matches", "matches_at"]

# The case-insensitive part of the rule, tried on the lowered text where a keyword was found
# (``match``, not ``search``: Python's ``re`` tries an alternation at every position of a log,
# ~6 ms per 60 KB, while ``str.find`` of the keywords and one anchored match per hit cost a
# small fraction of that).
_WORD_AT = re.compile(
    r"""
    (?<![a-z0-9_])
    (?:errors?|fatal|panic(?:ked)?|exceptions?|fail(?:s|ed|ing|ure|ures)?|assert(?:ion)?
      |abort(?:ed)?|killed|oomkilled|denied|segmentation\ fault|core\ dumped|out\ of\ memory
      |timed\ out|no\ such\ file|not\ found|undefined\ reference|non-zero\ exit)
    (?![a-z0-9_])
    | (?<![a-z0-9_])exit(?:ed)?(?:\ with)?\ (?:status|code)[\s:=]*-?0*[1-9]
    | (?<![a-z0-9_])(?:expected\s*[:<]|received\s*:|actual\s*:|but\ was\b)
    """,
    re.VERBOSE,
)
# Every match of the rule starts with one of these (lowered); ``matches_at`` tests each hit.
_KEYWORDS = (
    "error",
    "fatal",
    "panic",
    "exception",
    "fail",
    "assert",
    "abort",
    "killed",
    "oomkilled",
    "denied",
    "segmentation fault",
    "core dumped",
    "out of memory",
    "timed out",
    "no such file",
    "not found",
    "undefined reference",
    "non-zero exit",
    "exit",
    "expected",
    "received",
    "actual",
    "but was",
    "err!",
    "e  ",
)
# The searches of the lowered text that find every keyword: a search's text and the keywords a
# hit of it may start, at the hit plus an offset. Each search is a pass over the text, so a
# keyword that holds another whole is found through that one's search (``oomkilled`` ends in
# ``killed``, ``non-zero exit`` in ``exit``), and ``error`` and ``err!`` share ``err``: 22
# passes, not 25.
_SHARED: Final[tuple[tuple[str, tuple[tuple[str, int], ...]], ...]] = (
    ("err", (("error", 0), ("err!", 0))),
    ("killed", (("killed", 0), ("oomkilled", -len("oom")))),
    ("exit", (("exit", 0), ("non-zero exit", -len("non-zero ")))),
)
_SEARCHES = (
    *_SHARED,
    *(
        (keyword, ((keyword, 0),))
        for keyword in _KEYWORDS
        if not any(keyword == k for _, starts in _SHARED for k, _ in starts)
    ),
)
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_ASCII_LOWER: Final = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")

# What a ``KeywordFinder`` looks for: the keywords, but pytest's ``e  `` with the line break
# before it (it only counts at a line's start, and ``e`` then two spaces is common in aligned
# output: alone it made the finder's prefilter ~3x slower). Its keyword is one character on.
FINDER_NEEDLES: Final[tuple[str, ...]] = (
    *(keyword for keyword in _KEYWORDS if keyword != "e  "),
    "\ne  ",
)
_NEEDLE_KEYWORD: Final[tuple[tuple[str, int], ...]] = tuple(
    ("e  ", 1) if needle == "\ne  " else (needle, 0) for needle in FINDER_NEEDLES
)


def _overlaps(first: str) -> tuple[tuple[int, int], ...]:
    """``(offset, needle index)`` of each needle that may start at ``offset`` within
    ``first``'s match (other than ``first`` itself at 0): a finder may leave these out."""
    return tuple(
        (offset, index)
        for offset in range(len(first))
        for index, other in enumerate(FINDER_NEEDLES)
        if (offset or other != first)
        and first[offset : offset + len(other)] == other[: len(first) - offset]
    )


_OVERLAPS: Final = tuple(_overlaps(needle) for needle in FINDER_NEEDLES)


class KeywordFinder(Protocol):
    """Finds ``FINDER_NEEDLES`` in a lowered text (``low``: ASCII letters lowered, nothing else
    changed) in one pass.

    Returns ``(needle index, start, end)`` character offsets in order of start, such that every
    occurrence of a needle either is listed or starts within a listed one (``start`` included,
    ``end`` not): all occurrences qualify, and so do non-overlapping leftmost-first matches (an
    occurrence left out starts inside the match that was found instead, and every needle that
    can start there is tried, by ``_OVERLAPS``). ``None``: not searched (a text the finder
    cannot take); the standard library's search looks instead.
    """

    def __call__(self, low: str) -> Sequence[tuple[int, int, int]] | None: ...


def first_matches(
    text: str, begin: int, end: int, finder: KeywordFinder | None = None
) -> list[tuple[int, int]]:
    """``(line start, first match)`` of each line of ``text[begin:end]`` the rule matches, in
    order; ``begin`` is a line start. ``finder``: a one-pass search (``None``: ``str.find``)."""
    region = text[begin:end]
    # ASCII-only lowering keeps every offset where it was (``str.lower`` may not).
    low = region.lower() if region.isascii() else region.translate(_ASCII_LOWER)
    matches = None if finder is None else finder(low)
    if matches is None:
        return sorted((begin + line, begin + at) for line, at in _searched(region, low).items())
    # ``_found`` takes the lines in order (its matches are in order of start): no sort.
    return [(begin + line, begin + at) for line, at in _found(region, low, matches).items()]


def _searched(region: str, low: str) -> dict[int, int]:
    """Line start → first match, by a ``str.find`` pass per search."""
    first: dict[int, int] = {}
    for needle, starts in _SEARCHES:
        at = low.find(needle)
        while at >= 0:
            line = low.rfind("\n", 0, at) + 1
            hit = -1
            for keyword, offset in starts:
                start = at + offset
                if (
                    start >= line
                    and (hit < 0 or start < hit)
                    and low.startswith(keyword, start)
                    and matches_at(region, low, start, keyword, line)
                ):
                    hit = start
            if hit >= 0:
                if first.get(line, hit + 1) > hit:
                    first[line] = hit
                # One hit per line and search is enough: a later hit of this search on the
                # line starts its keywords further on (none of them repeats within another).
                at = low.find("\n", at)
                if at < 0:
                    break
            at = low.find(needle, at + 1)
    return first


def _found(region: str, low: str, matches: Sequence[tuple[int, int, int]]) -> dict[int, int]:
    """Line start → first match, from a finder's matches (in order of start), a line at once."""
    first: dict[int, int] = {}
    # A line's text → its first match's offset in it (-1: none). A log repeats its lines (the
    # same error at every step: 3 300 hits, a handful of lines distinct, in a 10 000-message
    # prepare), and what the rule finds in a line depends on the line alone, unless a keyword
    # whose match may run on into the next line is in it (``_REACHING``).
    known: dict[str, int] = {}
    decided_to = 0  # the end of the last line looked at
    if low.startswith("e  ") and matches_at(region, low, 0, "e  ", 0):  # no break before it
        first[0] = 0
        decided_to = _end(low, 0)
    count = len(matches)
    i = 0
    while i < count:
        index, at, _ = matches[i]
        start = at + _NEEDLE_KEYWORD[index][1]
        if start < decided_to:
            i += 1
            continue
        line = low.rfind("\n", 0, start) + 1
        decided_to = _end(low, start)
        j = i + 1  # the matches of this line: ``matches[i:j]``
        while j < count and matches[j][1] + _NEEDLE_KEYWORD[matches[j][0]][1] < decided_to:
            j += 1
        text = region[line:decided_to]
        offset = known.get(text)
        if offset is None:
            offset = _line_first(region, low, line, matches[i:j])
            if all(low.find(keyword, line, decided_to) < 0 for keyword in _REACHING):
                known[text] = offset
        if offset >= 0:
            first[line] = line + offset
        i = j
    return first


# The keywords whose match may run past its line's end (``\s*`` before a ``:`` or a status).
_REACHING = ("exit", "expected", "received", "actual")


def _line_first(region: str, low: str, line: int, matches: Sequence[tuple[int, int, int]]) -> int:
    """The offset in its line of the first place where the rule matches, trying each needle
    found and each that may start inside it (``_OVERLAPS``); -1 if none."""
    starts: list[tuple[int, str]] = []
    for index, at, _ in matches:
        keyword, shift = _NEEDLE_KEYWORD[index]
        starts.append((at + shift, keyword))
        for offset, other in _OVERLAPS[index]:
            if low.startswith(FINDER_NEEDLES[other], at + offset):
                keyword, shift = _NEEDLE_KEYWORD[other]
                starts.append((at + offset + shift, keyword))
    for start, keyword in sorted(starts):
        if matches_at(region, low, start, keyword, line):
            return start - line
    return -1


def _end(low: str, at: int) -> int:
    end = low.find("\n", at)
    return len(low) if end < 0 else end


def matches_at(text: str, low: str, at: int, keyword: str, line: int) -> bool:
    """Whether the rule matches where ``keyword`` was found in ``low`` (``text`` lowered)."""
    if keyword == "e  ":
        return at == line and text[at] == "E"  # pytest's detail line: ``E`` and two spaces
    if keyword == "err!":
        return text[at : at + 4] == "ERR!" and (at == 0 or low[at - 1] not in _NAME_CHARS)
    if _WORD_AT.match(low, at) is not None:
        return True
    if keyword in ("error", "exception"):
        # The end of a name that starts with a capital: ``ValueError``, ``IOException``.
        after = at + len(keyword)
        if text[at] != "E" or (after < len(text) and text[after] in _NAME_CHARS):
            return False
        name = at
        while name > 0 and text[name - 1] in _NAME_CHARS:
            name -= 1
        return name < at and "A" <= text[name] <= "Z"
    return False
