"""Salient lines: what pruning (spec §2.1) and projection (§2.2) keep of the part they cut (§9).

A long log loses its middle to head/tail cutting, and the middle is where a build's first error,
a failing test or a panic usually is. Both stages therefore look at the lines of the cut part and
keep those that match the rule below, after the spec's marker (whose text and count do not
change), in their original order and with their line numbers, within a fixed share of the kept
budget. A text with no salient line in its cut part is cut exactly as before.

The rule (deterministic, no model; case-insensitive unless marked):

- a word ``error``/``errors``, ``fatal``, ``panic``/``panicked``, ``exception``/``exceptions``,
  ``fail``/``fails``/``failed``/``failing``/``failure``/``failures``, ``assert``/``assertion``,
  ``abort``/``aborted``, ``killed``, ``denied``; the phrases ``segmentation fault``,
  ``core dumped``, ``out of memory``, ``timed out``, ``no such file``, ``not found``,
  ``undefined reference``, ``non-zero exit``; ``OOMKilled``;
- case-sensitive: a name ending in ``Error`` or ``Exception`` (``ValueError``,
  ``NullPointerException``), npm's ``ERR!``, and pytest's detail lines (``E`` then two spaces);
- a non-zero exit status: ``exit code 2``, ``exited with status 1``, ``exit status: 137``
  (a zero status is not salient);
- an assertion's comparison: ``Expected:``, ``Received:``, ``Actual:``, ``expected:<5>``,
  ``but was``;
- the last line of a Python traceback: the first non-indented line after
  ``Traceback (most recent call last):`` and its indented frames.

Counts of nothing do not make a line salient: ``0 errors``, ``no failures``, ``failed: 0`` are
removed from a line before it is tested. Identical lines are listed once, with how many more
times and where they last occurred. A line longer than ``SALIENT_LINE_CHARS`` is shown as a
window around its first match. Lines are numbered from 1 in the text the stage cuts (for pruning
the result's text blocks joined with ``\\n``, for projection their concatenation).

Rendered section (each line ends with ``\\n``)::

    [salient lines of the cut part (line number: text)]
    812: error: cannot find symbol
    990: FAILED tests/test_x.py::test_y - AssertionError [2 more times, last at line 1203]
    [end of salient lines; 4 more not shown]

Lines are taken in order while the section fits its limit (``salient_section``); the rest are
counted in the closing line.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from app.core.pipeline.salient_search import KeywordFinder, first_matches

__all__ = [
    "SALIENT_LINE_CHARS",
    "SALIENT_SHARE_PERCENT",
    "SalientLine",
    "SalientLineMemo",
    "salient_lines",
    "salient_lines_of",
    "salient_section",
]

# The salient section may use at most this share of the stage's kept budget (pruning: of the
# 4096 + 1024 characters kept; projection: of the 32 000-byte budget less its marker).
SALIENT_SHARE_PERCENT = 25
SALIENT_LINE_CHARS = 300
# A long line is shown from this many characters before its first match.
_WINDOW_LEAD = 100

# Counts of nothing, blanked out of a line before it is tested again.
_NOTHING = re.compile(
    r"""
    \b(?:0|no|zero|without)\s+(?:errors?|failures?|failed|fail(?:s|ing)?|exceptions?)\b
    | \b(?:errors?|failures?|failed|exceptions?)\s*[:=]\s*0\b
    """,
    re.IGNORECASE | re.VERBOSE,
)
_TRACEBACK = "Traceback (most recent call last):"

_HEADER = "[salient lines of the cut part (line number: text)]\n"
_FOOTER = "[end of salient lines]\n"


@dataclass(frozen=True, slots=True)
class SalientLine:
    number: int  # 1-based, in the text the stage cuts
    text: str  # as shown: ``\r`` stripped, cut to a window when long
    repeats: int = 0  # further identical lines in the cut part
    last_number: int = 0  # where the last of them is (when ``repeats``)

    def render(self) -> str:
        if not self.repeats:
            return f"{self.number}: {self.text}\n"
        return (
            f"{self.number}: {self.text} "
            f"[{self.repeats} more times, last at line {self.last_number}]\n"
        )


# The ``(begin, end)`` character span of every salient line found, and the lines collapsed.
_Found = tuple[tuple[tuple[int, int], ...], tuple[SalientLine, ...]]


class SalientLineMemo:
    """The lines found in recently cut texts, by the text itself (bounded). The core keeps none:
    a caller that prepares again and again (the service: ``app/services/salient_memo.py``) owns
    one and hands it to ``prepare`` (``salient=``).

    Every prepare cuts every pruned result again (the stored message never changes, the request
    copy is rebuilt), and finding the lines costs ~0.3 ms per 20 KB log while looking a text up
    costs its hash (~15 µs per 60 KB): 200 pruned logs made a 10 000-message prepare three times
    slower without it. The key holds the text, so a hit is an equal text, never a collision.
    Oldest entries go first once the keys hold more than ``MAX_CHARS`` characters.
    """

    MAX_CHARS = 8_000_000
    MAX_ENTRIES = 4096

    def __init__(self, finder: KeywordFinder | None = None) -> None:
        # How the lines of a text not remembered are looked for (``salient_search.py``): the
        # caller's one-pass search, or ``None`` for the standard library's.
        self.finder = finder
        self._entries: OrderedDict[tuple[str, int, int], _Found] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, int, int]) -> _Found | None:
        return self._entries.get(key)

    def put(self, key: tuple[str, int, int], found: _Found) -> None:
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = found
            self._chars += len(key[0])
            while self._chars > self.MAX_CHARS or len(self._entries) > self.MAX_ENTRIES:
                (text, _, _), _ = self._entries.popitem(last=False)
                self._chars -= len(text)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._chars = 0


def salient_lines(
    text: str,
    start: int,
    stop: int,
    *,
    touching: tuple[int, int] | None = None,
    memo: SalientLineMemo | None = None,
) -> Sequence[SalientLine]:
    """The salient lines of ``text`` that have a character in ``[start, stop)``, in order.

    Offsets are characters. Identical lines (as shown) are collapsed into the first. With
    ``touching`` (a range inside ``[start, stop)``), none unless one of them has a character in
    that range too (projection: a wider cut only when the plain cut loses a salient line).
    ``memo``: the caller's memo of texts already looked at (``None``: look again).
    """
    if start >= stop:
        return ()
    key = (text, start, stop)
    found = None if memo is None else memo.get(key)
    if found is None:
        found = _find(text, start, stop, None if memo is None else memo.finder)
        if memo is not None:
            memo.put(key, found)
    spans, lines = found
    if touching is not None:
        low, high = touching
        if not any(begin < high and end > low for begin, end in spans):
            return ()
    return lines


def salient_lines_of(text: str) -> Sequence[SalientLine]:
    """The salient lines of the whole of ``text``, not remembered (a text looked at once, as
    the ``local`` summarizer looks at each tool result, would only push out the cut ones)."""
    return _find(text, 0, len(text))[1] if text else ()


def _find(text: str, start: int, stop: int, finder: KeywordFinder | None = None) -> _Found:
    """The ``(begin, end)`` of every salient line in the range, and the lines collapsed."""
    begin = text.rfind("\n", 0, start) + 1
    end = _line_end(text, stop - 1)
    # One loop over the lines the rule matches (in order: ``first_matches``) finds each line's
    # end, shows it, numbers it and collapses it: a log's hits are its cost (3 300 lines in a
    # 10 000-message prepare, ~3 µs each in separate passes).
    spans: list[tuple[int, int]] = []
    found: dict[int, tuple[int, str, int]] = {}  # line start → (line end, as shown, number)
    seen: dict[str, list[int]] = {}  # as shown → [first number, repeats, last number]
    # A line and its first match → as shown (``None``: only counts of nothing). A log repeats
    # its lines (the same error at every step: 3 300 salient lines, a handful distinct, in a
    # 10 000-message prepare), and each is looked at once.
    shown_of: dict[tuple[str, int], str | None] = {}
    number = text.count("\n", 0, begin) + 1
    counted_to = begin
    find, count, size = text.find, text.count, len(text)
    for line_start, match_at in first_matches(text, begin, end, finder):
        line_end = find("\n", line_start)
        if line_end < 0:
            line_end = size
        key = (text[line_start:line_end], match_at - line_start)
        if key in shown_of:
            shown = shown_of[key]
        else:
            shown = shown_of[key] = _salient_shown(*key, finder)
        if shown is None:
            continue
        number += count("\n", counted_to, line_start)
        counted_to = line_start
        found[line_start] = (line_end, shown, number)
        spans.append((line_start, line_end))
        _tally(seen, shown, number)
    added = False
    for line_start, line_end in _traceback_last_lines(text, stop):
        if line_end > start and line_start not in found:
            shown = _shown(text[line_start:line_end], 0)
            found[line_start] = (line_end, shown, text.count("\n", 0, line_start) + 1)
            added = True
    if added:  # a traceback's last line: in order with the others, collapsed again
        starts = sorted(found)
        return tuple((at, found[at][0]) for at in starts), _collapsed(found, starts)
    return tuple(spans), _lines(seen)


def _salient_shown(line: str, match_at: int, finder: KeywordFinder | None) -> str | None:
    """``line`` as shown, its first match at ``match_at``; ``None`` if its only matches are
    counts of nothing."""
    if _may_count_nothing(line) and _NOTHING.search(line) is not None:
        # Blank the counts of nothing (same length: offsets kept) and test what is left.
        blanked = _NOTHING.sub(lambda m: " " * len(m.group()), line)
        rest = first_matches(blanked, 0, len(blanked), finder)
        if not rest:
            return None
        match_at = rest[0][1]
    return _shown(line, match_at)


def _may_count_nothing(line: str) -> bool:
    """Whether ``_NOTHING`` may match: a match holds ``0`` or, lowered, ``no``, ``zero`` or
    ``without`` (looked for by its ``out``: ``i`` has non-ASCII case twins in ``re``, these
    letters none). Most salient lines hold none of them, and this costs a fraction of the
    pattern's case-insensitive search (~1 µs a line)."""
    if "0" in line:
        return True
    low = line.lower()
    return "no" in low or "zero" in low or "out" in low


def _line_end(text: str, at: int) -> int:
    end = text.find("\n", at)
    return len(text) if end < 0 else end


def _traceback_last_lines(text: str, stop: int) -> list[tuple[int, int]]:
    """``(begin, end)`` of the last line of each Python traceback, where it starts before
    ``stop``: the first line after the header and its indented frames."""
    out: list[tuple[int, int]] = []
    at = text.find(_TRACEBACK, 0, stop)
    while at >= 0:
        begin = _line_end(text, at) + 1
        while begin < min(stop, len(text)):
            end = _line_end(text, begin)
            if end == begin:
                break  # a blank line: the traceback was cut short, no last line
            if text[begin] not in " \t":
                out.append((begin, end))
                break
            begin = end + 1
        at = text.find(_TRACEBACK, at + len(_TRACEBACK), stop)
    return out


def _shown(line: str, match_at: int) -> str:
    line = line.rstrip("\r")
    if len(line) <= SALIENT_LINE_CHARS:
        return line
    lead = max(0, min(match_at - _WINDOW_LEAD, len(line) - SALIENT_LINE_CHARS))
    window = line[lead : lead + SALIENT_LINE_CHARS]
    return ("…" if lead else "") + window + ("…" if lead + SALIENT_LINE_CHARS < len(line) else "")


def _collapsed(
    found: dict[int, tuple[int, str, int]], starts: list[int]
) -> tuple[SalientLine, ...]:
    # Shown text → [first number, repeats, last number]: a ``SalientLine`` is made once for
    # all the repeats of a line.
    seen: dict[str, list[int]] = {}
    for begin in starts:
        _, shown, number = found[begin]
        _tally(seen, shown, number)
    return _lines(seen)


def _tally(seen: dict[str, list[int]], shown: str, number: int) -> None:
    """Count a line into ``seen`` (shown text → [first number, repeats, last number])."""
    figures = seen.get(shown)
    if figures is None:
        seen[shown] = [number, 0, 0]
    else:
        figures[1] += 1
        figures[2] = number


def _lines(seen: dict[str, list[int]]) -> tuple[SalientLine, ...]:
    return tuple(
        SalientLine(first, shown, more, last) for shown, (first, more, last) in seen.items()
    )


def salient_section(
    lines: Sequence[SalientLine], limit: int, measure: Callable[[str], int] = len
) -> tuple[str, int]:
    """The rendered section of the first ``lines`` that fit ``limit`` (by ``measure``) and how
    many it lists; ``("", 0)`` when there is no line or not even one fits."""
    if not lines:
        return "", 0
    pieces = [line.render() for line in lines]
    whole = _HEADER + "".join(pieces) + _FOOTER
    if measure(whole) <= limit:
        return whole, len(lines)
    # Not all of them: the closing line's longest form is reserved, so what is listed fits.
    used = measure(_HEADER) + measure(_closing(len(lines)))
    listed = 0
    for piece in pieces:
        used += measure(piece)
        if used > limit:
            break
        listed += 1
    if not listed:
        return "", 0
    return _HEADER + "".join(pieces[:listed]) + _closing(len(lines) - listed), listed


def _closing(not_shown: int) -> str:
    if not_shown == 0:
        return _FOOTER
    return f"[end of salient lines; {not_shown} more not shown]\n"
