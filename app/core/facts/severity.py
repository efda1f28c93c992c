"""How severe a log line is, and the few lines of a log worth keeping (spec §9).

A log often repeats a harmless error many times before the one line that matters: 29
``ERROR … retrying`` lines, then ``FATAL: ledger lock timeout``. Keeping the *first* matching
lines keeps the noise; keeping the *most severe distinct* ones keeps the cause. Levels, most
severe first:

- ``FATAL``: fatal, panic/panicked, critical, emergency, segmentation fault, core dumped,
  out of memory, OOMKilled;
- ``ERROR``: error, exception, traceback, failed/failure, timed out, denied (and a name
  ending in ``Error``/``Exception``);
- ``WARNING``: warn, warning;
- ``OTHER``: anything else (a salient line that names none of these).

A line that says it will be retried (``retrying``, ``will retry``, ``retry in``) is transient and
counts after the other lines of its level. Two lines are the same when they differ only in
numbers (attempt counts, timestamps, durations).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence

__all__ = ["Severity", "most_severe", "retry_key", "severity"]


class Severity(enum.IntEnum):
    FATAL = 0
    ERROR = 1
    WARNING = 2
    OTHER = 3


_LEVELS = (
    (
        Severity.FATAL,
        re.compile(
            r"\b(?:fatal|panic(?:ked)?|critical|crit|emerg(?:ency)?|segmentation\ fault"
            r"|core\ dumped|out\ of\ memory|oomkilled)\b",
            re.IGNORECASE | re.VERBOSE,
        ),
    ),
    (
        Severity.ERROR,
        re.compile(
            r"\b(?:errors?|err!?|exceptions?|traceback|fail(?:s|ed|ure|ures)?|timed\ out|denied)\b"
            r"|[a-z](?:Error|Exception)\b",
            re.IGNORECASE | re.VERBOSE,
        ),
    ),
    (Severity.WARNING, re.compile(r"\bwarn(?:ing)?s?\b", re.IGNORECASE)),
)
_TRANSIENT = re.compile(r"\b(?:retrying|will\ retry|retry\ in|retries\ left)\b", re.I | re.X)
_NUMBER = re.compile(r"\d+")


def severity(line: str) -> Severity:
    """The level of ``line``: the most severe word it holds."""
    for level, pattern in _LEVELS:
        if pattern.search(line) is not None:
            return level
    return Severity.OTHER


def retry_key(line: str) -> str | None:
    """What the retries of one failure share (``retrying (attempt 3)`` and ``(attempt 4)``:
    their numbers differ), so they count as one line; ``None`` for a line that is no retry."""
    if _TRANSIENT.search(line) is None:
        return None
    return _NUMBER.sub("#", line.strip())


def _order(line: str) -> tuple[int, bool]:
    return int(severity(line)), _TRANSIENT.search(line) is not None


def most_severe(lines: Sequence[str], keep: int) -> list[str]:
    """At most ``keep`` distinct lines of ``lines``, the most severe first chosen (a transient
    line after the others of its level, then the earliest), returned in their original order."""
    ranked = sorted(range(len(lines)), key=lambda i: (*_order(lines[i]), i))
    chosen: list[int] = []
    shapes: set[str] = set()
    for index in ranked:
        if len(chosen) >= keep:
            break
        shape = _NUMBER.sub("#", lines[index].strip())
        if shape in shapes:
            continue
        shapes.add(shape)
        chosen.append(index)
    return [lines[i] for i in sorted(chosen)]
