"""Readings of a changing metric in what the user and the assistant said: ``error_rate 2.3 %``,
``p99 latency: 340 ms``, ``错误率 0.1%``. The summarizer keeps the latest value of each and
says which value it replaced (spec §9: the latest word wins, and says what it replaced).

A metric is a snake_case or dotted name (``error_rate``, ``cpu.usage``), or one of a few
common words (error rate, latency, p50…p999, throughput, cpu, memory, qps, rps, 错误率, 延迟),
then a number with a unit (``%``, ``ms``, ``s``, ``MB``…); a snake_case or dotted name may
also take a bare number after ``=`` or ``:``. Counts without a name or unit are not readings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Reading", "readings"]

_READING = re.compile(
    r"""
    (?<![A-Za-z0-9_.])
    (?P<name>[A-Za-z][A-Za-z0-9]*(?:[_.][A-Za-z0-9]+)+
      |(?:error|failure|success|drop|retry)\ rate|p\d{2,3}(?:\ latency)?|latency|throughput
      |cpu|memory|qps|rps|错误率|延迟|成功率)
    (?:
      \s*(?::|=|is|was|at|now|of)?\s*
      (?P<value>\d+(?:\.\d+)?\s?(?:%|ms|µs|us|s|sec|min|[KMG]i?B|rps|qps|req/s|/s)(?![\w/]))
    | \s*[:=]\s*(?P<bare>\d+(?:\.\d+)?)(?![\w.%])
    )
    """,
    re.IGNORECASE | re.VERBOSE,
)


@dataclass(frozen=True, slots=True)
class Reading:
    name: str  # as written
    value: str  # as written, with its unit

    @property
    def key(self) -> str:
        """The metric, however it is written: ``Error rate`` and ``error_rate`` are one."""
        return re.sub(r"[\s_.]+", "_", self.name.casefold())


def readings(text: str) -> list[Reading]:
    """The metric readings of ``text``, in order."""
    found = []
    for match in _READING.finditer(text):
        name = match.group("name")
        bare = match.group("bare")
        if bare is not None and not re.search(r"[_.]", name):
            continue
        found.append(Reading(name, match.group("value") or bare))
    return found
