"""Reading an earlier summary back, section by section, so the next ``local`` summary merges it
with the new material instead of copying it (spec §9.1: copying made the summary grow with every
compaction).

The ``local`` summarizer's own lines are recognized by their prefixes (``Latest user request:``,
``Identifiers:``, ``Edited:``, a ``(×N)`` count, ...). Anything else — a summary written by
another model (bring-your-own), or by an older version of this one (``Earlier summary:`` lines)
— is kept as plain entries of its section, so nothing an earlier summary said is lost unread.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from app.core.compaction._local_rank import REPLACED_MARK, mark_replaced
from app.core.compaction._local_text import repeat_key
from app.core.compaction.request import SUMMARY_HEADINGS, SUMMARY_ROOT_CLOSE, SUMMARY_ROOT_OPEN

__all__ = [
    "COMPACTIONS_PREFIX",
    "EDITED_PREFIX",
    "FIRST_PREFIX",
    "IDENTIFIERS_PREFIX",
    "LATEST_PREFIX",
    "METRIC_PREFIX",
    "NARRATIVE_PREFIX",
    "OTHER_IDENTIFIERS_PREFIX",
    "TOOLS_PREFIX",
    "TOOL_PATHS_PREFIX",
    "Ages",
    "Carried",
    "Counted",
    "counted",
    "read_summary",
]

LATEST_PREFIX = "Latest user request: "
FIRST_PREFIX = "First user request: "
# The user's identifiers only (their words' authority); those seen only in tool output or in
# the assistant's text are listed apart, each with where it came from (spec §1: origins).
IDENTIFIERS_PREFIX = "Identifiers: "
OTHER_IDENTIFIERS_PREFIX = "Identifiers not named by the user: "
TOOLS_PREFIX = "Tools called: "
EDITED_PREFIX = "Edited: "
TOOL_PATHS_PREFIX = "Files named in tool calls: "
COMPACTIONS_PREFIX = "Compactions so far: "
NARRATIVE_PREFIX = "Assistant: "
# ``Metric: error_rate 0.1 % (replaces 2.3 %)``: the latest value of a changing metric.
METRIC_PREFIX = "Metric: "

# Prefixes of the summarizer's earlier versions, read as their current forms.
_OLD_PREFIXES: Final = {
    "First user request here: ": FIRST_PREFIX,
    "Identifiers mentioned: ": IDENTIFIERS_PREFIX,
}
_COUNT = re.compile(r"^\(×(\d+)\) ")
_TOOL_COUNT = re.compile(r"^(.*) ×(\d+)$")
_WITH_ORIGIN = re.compile(r"^(\S+) \((assistant|tool output)\)$")
_COMPACTIONS = re.compile(r"^(\d+)\b")
_METRIC = re.compile(r"^(?P<name>.+?) (?P<value>\d[^()]*?)(?: \(replaces (?P<was>.+)\))?$")
_SKIPPED = re.compile(r"^(?:Source: |\.\.\. \d+ more edited paths|\(\d+ earlier user messages)")


@dataclass(slots=True)
class Carried:
    """What an earlier summary holds, by kind; entries in the order it listed them."""

    latest_request: str | None = None
    first_request: str | None = None
    identifiers: list[str] = field(default_factory=list)  # the user's
    other_identifiers: list[tuple[str, str]] = field(default_factory=list)  # (id, origin)
    tool_counts: dict[str, int] = field(default_factory=dict)
    edited_paths: list[str] = field(default_factory=list)
    tool_paths: list[str] = field(default_factory=list)
    errors: list[tuple[str, int]] = field(default_factory=list)  # (text, times seen)
    narrative: list[str] = field(default_factory=list)
    requests: list[tuple[str, int]] = field(default_factory=list)  # (text, times asked)
    plan: list[str] = field(default_factory=list)
    metrics: list[tuple[str, str, str | None]] = field(default_factory=list)  # name, value, was
    compactions: int = 0


class Ages:
    """Ages in the order things were seen: what an earlier summary held first, then the new."""

    def __init__(self) -> None:
        self._next = 0

    def __call__(self) -> int:
        self._next += 1
        return self._next


@dataclass(slots=True)
class Counted:
    """Distinct texts by ``repeat_key``, each with its count and last-seen age."""

    shown: dict[str, str]
    count: dict[str, int]
    age: dict[str, int]

    @classmethod
    def empty(cls) -> Counted:
        return cls({}, {}, {})

    def add(self, text: str, times: int, age: int, key: str | None = None) -> None:
        key = key or repeat_key(text) or text
        self.shown.setdefault(key, text)
        self.count[key] = self.count.get(key, 0) + times
        self.age[key] = age

    def entries(
        self, rank_of: dict[str, int] | None = None, default_rank: int = 0
    ) -> list[tuple[str, int, int]]:
        """``(text with its count, rank, age)``, oldest first."""
        out = []
        for key in self.oldest_first():
            times = self.count[key]
            text = self.shown[key] if times == 1 else f"(×{times}) {self.shown[key]}"
            out.append((text, (rank_of or {}).get(key, default_rank), self.age[key]))
        return out

    def oldest_first(self) -> list[str]:
        return sorted(self.shown, key=lambda k: self.age[k])

    def mark_replaced(self, new: set[str]) -> set[str]:
        """Mark the requests a later new one replaces; their texts (unmarked) are returned."""
        keys = self.oldest_first()
        texts = [self.shown[key] for key in keys]
        replaced = mark_replaced(texts, [key in new for key in keys])
        for index in replaced:
            self.shown[keys[index]] = REPLACED_MARK + texts[index]
        return {texts[index] for index in replaced}


def counted(entry: str) -> tuple[str, int]:
    """``(text, count)`` of an entry written ``(×N) text`` (or plain: count 1)."""
    match = _COUNT.match(entry)
    if match is None:
        return entry, 1
    return entry[match.end() :], int(match.group(1))


def read_summary(summary: str | None) -> Carried:
    """The entries of an earlier summary (``None``: there is none)."""
    carried = Carried()
    if summary is None:
        return carried
    for section, entries in enumerate(_sections(summary)):
        for raw in entries:
            entry = _current_form(raw)
            if entry and _SKIPPED.match(entry) is None:
                _take(carried, section, entry)
    return carried


def _current_form(entry: str) -> str:
    while entry.startswith("Earlier summary: "):
        entry = entry.removeprefix("Earlier summary: ")
    for old, new in _OLD_PREFIXES.items():
        if entry.startswith(old):
            return new + entry.removeprefix(old)
    return entry.strip()


def _take(carried: Carried, section: int, entry: str) -> None:
    if section == 0:
        if entry.startswith(LATEST_PREFIX):
            carried.latest_request = entry.removeprefix(LATEST_PREFIX)
        elif entry.startswith(FIRST_PREFIX):
            carried.first_request = entry.removeprefix(FIRST_PREFIX)
        else:
            carried.narrative.append(entry)
    elif section == 1:
        if entry.startswith(IDENTIFIERS_PREFIX):
            carried.identifiers += [
                i.strip() for i in entry.removeprefix(IDENTIFIERS_PREFIX).split(",") if i.strip()
            ]
        elif entry.startswith(OTHER_IDENTIFIERS_PREFIX):
            for item in entry.removeprefix(OTHER_IDENTIFIERS_PREFIX).split(", "):
                match = _WITH_ORIGIN.match(item.strip())
                if match is not None:
                    carried.other_identifiers.append((match.group(1), match.group(2)))
        elif entry.startswith(TOOLS_PREFIX):
            for item in entry.removeprefix(TOOLS_PREFIX).split(", "):
                match = _TOOL_COUNT.match(item)
                if match is not None:
                    name = match.group(1)
                    carried.tool_counts[name] = carried.tool_counts.get(name, 0) + int(
                        match.group(2)
                    )
        else:
            carried.narrative.append(entry)
    elif section == 2:
        if entry.startswith(EDITED_PREFIX):
            carried.edited_paths.append(entry.removeprefix(EDITED_PREFIX))
        elif entry.startswith(TOOL_PATHS_PREFIX):
            carried.tool_paths += [
                p.strip() for p in entry.removeprefix(TOOL_PATHS_PREFIX).split(", ") if p.strip()
            ]
        else:
            carried.narrative.append(entry)
    elif section == 3:
        carried.errors.append(counted(entry))
    elif section == 4:
        if entry.startswith(COMPACTIONS_PREFIX):
            match = _COMPACTIONS.match(entry.removeprefix(COMPACTIONS_PREFIX))
            carried.compactions = int(match.group(1)) if match else 0
        elif entry.startswith(METRIC_PREFIX) and (
            reading := _METRIC.match(entry.removeprefix(METRIC_PREFIX))
        ):
            carried.metrics.append((reading["name"], reading["value"], reading["was"]))
        else:
            carried.narrative.append(entry.removeprefix(NARRATIVE_PREFIX))
    elif section == 5:
        carried.requests.append(counted(entry))
    elif section == 6:
        carried.plan.append(entry)
    # Current Work and Next Safe Action are stale by the next compaction: not carried.


def _sections(summary: str) -> list[list[str]]:
    """The entries of each of the nine sections: a ``- `` bullet with its ``  > ``
    continuation lines (joined by newlines), or any other non-empty line; ``None`` dropped."""
    start, end = summary.find(SUMMARY_ROOT_OPEN), summary.rfind(SUMMARY_ROOT_CLOSE)
    sections: list[list[str]] = [[] for _ in SUMMARY_HEADINGS]
    if start < 0:
        return sections
    body = summary[start + len(SUMMARY_ROOT_OPEN) : end if end > start else len(summary)]
    current: int | None = None
    for raw in body.splitlines():
        line = raw.strip()
        if line in SUMMARY_HEADINGS:
            current = SUMMARY_HEADINGS.index(line)
            continue
        if current is None or not line or line == "None":
            continue
        entries = sections[current]
        if raw.startswith("  > ") and entries:
            entries[-1] += "\n" + raw[4:]
        elif raw.startswith("  >") and entries and line == ">":
            entries[-1] += "\n"
        else:
            entries.append(line.removeprefix("- "))
    return sections
