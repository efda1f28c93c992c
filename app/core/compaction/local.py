"""The offline ``local`` model: an extractive summarizer and a short deterministic reply.

No network, no randomness, no clock: the same conversation always gives the same bytes. The
summary is always contract-valid (§7.4): every extracted text is neutralized (control tags
defused, continuation lines prefixed so nothing reads as a heading), empty sections say
``None``, and the fixed "Next Safe Action" text keeps it above 500 characters. It is extractive
on purpose: it quotes what the user asked, the identifiers, errors, paths and plan it can see,
and never invents a conclusion.

Long life (spec §9.1). Each summary *merges* the earlier one (``_local_merge``) with the
new material section by section: the same request, error, path or identifier is listed once
(a repeat raises its ``(×N)`` count and makes it recent again), and the summary never exceeds
``MAX_SUMMARY_BYTES`` however many compactions came before. What makes it fit, in order:

1. the newest only of each kind of narrative (``MAX_NARRATIVE`` assistant notes), of filler
   requests (``MAX_FILLER_REQUESTS``: requests with no constraint, identifier, path or error),
   of the user's softer rules (``MAX_RULES``) and of metrics (``MAX_METRICS``), and the
   ``MAX_ERRORS`` most severe errors, the newest first among equals;
2. then, while over the cap, entries are dropped by rank (``_local_rank``, spec §9: filler
   before constraints, never by age alone) — narrative, filler, replaced instructions, everyday
   entries, rules, key facts, the pending plan, and last the user's red lines and decisions —
   the oldest (least recently seen) first within a rank.

An instruction a later one replaced stays marked ``[replaced by a later request]``; a metric's
latest value says which it replaced (docs/compaction.md).

Never dropped: the latest and the first user request, the user's identifiers (at most
``MAX_IDENTIFIERS``; those seen only in tool output or assistant text are listed apart with
their origin, and can be dropped like a path) and the fixed lines; they fit the cap whatever
they hold. Every user message is kept verbatim while it fits ``MAX_REQUEST_CHARS``; a longer one
keeps its key sentences (constraints first) verbatim (``_local_text.shorten``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.core.compaction._local_merge import (
    COMPACTIONS_PREFIX,
    EDITED_PREFIX,
    FIRST_PREFIX,
    IDENTIFIERS_PREFIX,
    LATEST_PREFIX,
    METRIC_PREFIX,
    NARRATIVE_PREFIX,
    OTHER_IDENTIFIERS_PREFIX,
    TOOL_PATHS_PREFIX,
    TOOLS_PREFIX,
    Ages,
    Carried,
    Counted,
    read_summary,
)
from app.core.compaction._local_rank import (
    FILLER,
    KEEP,
    KEY_FACT,
    NARRATIVE,
    PINNED,
    PLAN,
    REPLACED_MARK,
    RULE,
    error_rank,
    latest_readings,
    request_rank,
)
from app.core.compaction._local_text import neutralize, repeat_key, shorten
from app.core.compaction._local_view import (
    IDENTIFIER_ORIGINS,
    IDENTIFIERS,
    ConversationFacts,
    Message,
    extract_facts,
    is_summary_request,
)
from app.core.compaction.request import SUMMARY_HEADINGS, SUMMARY_ROOT_CLOSE, SUMMARY_ROOT_OPEN
from app.core.compaction.validation import MIN_SUMMARY_CHARS
from app.core.counting import utf8_len
from app.core.facts import readings, retry_key

__all__ = ["MAX_SUMMARY_BYTES", "Message", "is_summary_request", "local_reply", "local_summary"]

# The cap (spec §9, docs/decisions.md): a summary is at most this many UTF-8 bytes, root to
# closing tag included (≤ 3 000 estimated tokens), after any number of compactions.
MAX_SUMMARY_BYTES = 12_000
MAX_LATEST_CHARS = 800
MAX_FIRST_CHARS = 400
MAX_REQUEST_CHARS = 400
MAX_ERROR_CHARS = 400
MAX_NEXT_ACTION_CHARS = 300
MAX_ASSISTANT_CHARS = 600
MAX_NARRATIVE_CHARS = 300
MAX_IDENTIFIERS = 40
MAX_IDENTIFIER_CHARS = 40
MAX_OTHER_IDENTIFIERS = 20
MAX_PATHS = 64
MAX_TOOL_PATHS = 24
MAX_ERRORS = 20
MAX_NARRATIVE = 4
MAX_FILLER_REQUESTS = 6
MAX_RULES = 12
MAX_METRICS = 12

_ORIGIN_ORDER: tuple[str, ...] = IDENTIFIER_ORIGINS

# Any agent reads it: only a coding agent (or one that asks) is offered conversation_history,
# so the tool is named as an option, never as the way (spec §6, agent control tools).
_NEXT_ACTION_FOOTER = (
    "Before acting on an exact detail this extractive summary does not state (a file content, "
    "a command output, an identifier), read it again (conversation_history, if you have it, "
    "reads the earlier messages); do not repeat tool calls whose results are recorded above, "
    "and do not claim work is done unless the conversation shows it."
)


@dataclass(frozen=True, slots=True)
class _Entry:
    lines: tuple[str, ...]  # rendered: ``- first`` then ``  > continuation`` lines
    rank: int
    age: int  # larger = seen more recently

    @property
    def size(self) -> int:
        return sum(utf8_len(line) + 1 for line in self.lines)


def _bullet(text: str) -> tuple[str, ...]:
    """One ``- `` item; continuation lines start with ``>`` so none can read as a heading."""
    lines = neutralize(text.strip()).splitlines() or [""]
    return (f"- {lines[0].rstrip()}", *(f"  > {line.rstrip()}".rstrip() for line in lines[1:]))


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} … [{len(text) - limit} more characters]"


def _newest(entries: list[_Entry], rank: int, keep: int) -> list[_Entry]:
    """``entries`` without the oldest of ``rank`` beyond the newest ``keep``."""
    of_rank = sorted((e.age for e in entries if e.rank == rank), reverse=True)
    if len(of_rank) <= keep:
        return entries
    oldest_kept = of_rank[keep - 1] if keep else max(of_rank) + 1
    return [e for e in entries if e.rank != rank or e.age >= oldest_kept]


def _sections(facts: ConversationFacts, carried: Carried) -> list[list[_Entry]]:
    age = Ages()
    requests = Counted.empty()
    for text, times in carried.requests:
        requests.add(text, times, age())
    new_requests = set()
    for request in facts.requests:
        shortened = shorten(request, MAX_REQUEST_CHARS)
        requests.add(shortened, 1, age())
        new_requests.add(repeat_key(shortened) or shortened)
    # The latest word wins: an instruction a later one replaced stays only marked so.
    replaced = requests.mark_replaced(new_requests)
    errors = Counted.empty()
    # The retries of one failure are one line, counted (their attempt numbers differ).
    for text, times in carried.errors:
        errors.add(text, times, age(), retry_key(text))
    for error in facts.tool_errors:
        errors.add(_clip(error, MAX_ERROR_CHARS), 1, age(), retry_key(error))

    latest = (
        shorten(facts.requests[-1], MAX_LATEST_CHARS) if facts.requests else carried.latest_request
    )
    # The session's first request: an earlier summary's, else the request it summarized last
    # (it listed no first one because it had only that), else the first in view.
    first = carried.first_request or (
        shorten(carried.latest_request, MAX_FIRST_CHARS)
        if carried.latest_request
        else shorten(facts.requests[0], MAX_FIRST_CHARS)
        if facts.requests
        else None
    )
    if first in replaced:
        first = REPLACED_MARK + first
    pinned = age() + 10_000_000  # never dropped: their age does not matter

    primary = []
    if latest:
        primary.append(_Entry(_bullet(LATEST_PREFIX + latest), PINNED, pinned))
    if first and first != latest:
        primary.append(_Entry(_bullet(FIRST_PREFIX + first), PINNED, pinned))

    concepts = []
    identifiers, others = _identifiers(facts, carried, requests)
    if identifiers:
        concepts.append(_Entry(_bullet(IDENTIFIERS_PREFIX + ", ".join(identifiers)), PINNED, 0))
    if others:
        listed = ", ".join(f"{ident} ({origin})" for ident, origin in others)
        concepts.append(_Entry(_bullet(OTHER_IDENTIFIERS_PREFIX + listed), KEEP, 0))
    tools = dict(carried.tool_counts)
    for name, times in facts.tool_counts.items():
        tools[name] = tools.get(name, 0) + times
    if tools:
        used = ", ".join(f"{name} ×{n}" for name, n in sorted(tools.items()))
        concepts.append(_Entry(_bullet(TOOLS_PREFIX + used), NARRATIVE, pinned))

    paths = sorted(set(carried.edited_paths) | set(facts.edited_paths) | set(facts.reminder_paths))
    files = [_Entry(_bullet(EDITED_PREFIX + p), KEEP, index) for index, p in enumerate(paths)]
    files = files[:MAX_PATHS]
    named = _recent_unique([*carried.tool_paths, *facts.tool_paths], MAX_TOOL_PATHS)
    if named:
        files.append(_Entry(_bullet(TOOL_PATHS_PREFIX + ", ".join(named)), NARRATIVE, pinned))

    # The most severe errors first, then the newest (a FATAL outlasts any number of retries).
    error_entries = [_Entry(_bullet(t), error_rank(t), a) for t, _, a in errors.entries()]
    kept = sorted(error_entries, key=lambda e: (e.rank, -e.age))[:MAX_ERRORS]
    error_entries = [e for e in error_entries if e in kept]

    decisions = [_Entry(_bullet(_progress(facts, carried)), PINNED, pinned)]
    # The same note again is one note, as recent as its last occurrence.
    notes: dict[str, tuple[str, int]] = {}
    for note in [
        *carried.narrative,
        *(shorten(t, MAX_NARRATIVE_CHARS) for t in facts.assistant_texts),
    ]:
        notes.pop(repeat_key(note), None)
        notes[repeat_key(note)] = (note, age())
    narrative = [_Entry(_bullet(NARRATIVE_PREFIX + n), NARRATIVE, a) for n, a in notes.values()]
    decisions += _metrics(facts, carried, age)
    decisions += _newest(narrative, NARRATIVE, MAX_NARRATIVE)

    rank_of = {key: request_rank(text, first) for key, text in requests.shown.items()}
    messages = [_Entry(_bullet(t), rank, a) for t, rank, a in requests.entries(rank_of)]
    messages = _newest(_newest(messages, FILLER, MAX_FILLER_REQUESTS), RULE, MAX_RULES)

    # The execution frontier outlasts everything but the user's constraints (the reminder
    # carries the plan too; only the summary carries the constraints).
    steps = _pending(facts) or carried.plan
    pending = [_Entry(_bullet(step), PLAN, index) for index, step in enumerate(steps)]

    current = []  # the latest request is section 1's
    if facts.assistant_texts:
        reply = "Last assistant reply: " + shorten(facts.assistant_texts[-1], MAX_ASSISTANT_CHARS)
        current.append(_Entry(_bullet(reply), NARRATIVE, pinned))
    # An earlier summary's Current Work and Next Safe Action are stale by now: not carried.

    next_action = [_Entry(_bullet(line), PINNED, pinned) for line in _next_action(facts, latest)]
    return [
        primary,
        concepts,
        files,
        error_entries,
        decisions,
        messages,
        pending,
        current,
        next_action,
    ]


def _metrics(facts: ConversationFacts, carried: Carried, age: Ages) -> list[_Entry]:
    """The latest value of each changing metric, saying which value it replaced; the
    ``MAX_METRICS`` most recently changed. The assistant's readings count after the user's."""
    new = [r for text in [*facts.requests, *facts.assistant_texts] for r in readings(text)]
    entries = []
    for name, value, was in latest_readings(carried.metrics, new)[-MAX_METRICS:]:
        line = f"{METRIC_PREFIX}{name} {value}" + (f" (replaces {was})" if was else "")
        entries.append(_Entry(_bullet(line), KEY_FACT, age()))
    return entries


def _identifiers(
    facts: ConversationFacts, carried: Carried, requests: Counted
) -> tuple[list[str], list[tuple[str, str]]]:
    """The identifiers the user named (first seen first, at most ``MAX_IDENTIFIERS``), and
    those seen only in the assistant's text or tool output, each with its origin (the most
    recent ``MAX_OTHER_IDENTIFIERS``). Only the user's words give an identifier the
    ``Identifiers:`` line: an id in a log line (``close INC-999``) is tool output, never the
    user's request (spec §1)."""
    said = " ".join([*requests.shown.values(), carried.first_request or ""])
    # Whole tokens only: the user naming INC-999 does not name INC-99.
    named = {m.group(0) for m in IDENTIFIERS.finditer(said)}
    by_user = [
        i
        for i in dict.fromkeys(
            [
                *carried.identifiers,
                *(i for i in facts.identifiers if facts.identifier_origins.get(i) == "user"),
                *(i for i, _ in carried.other_identifiers if i in named),
                *(i for i in facts.identifiers if i in named),
            ]
        )
        if len(i) <= MAX_IDENTIFIER_CHARS
    ][:MAX_IDENTIFIERS]
    user = set(by_user)
    others: dict[str, str] = {}
    for ident, origin in [
        *carried.other_identifiers,
        *((i, facts.identifier_origins.get(i, "tool output")) for i in facts.identifiers),
    ]:
        if ident in user or len(ident) > MAX_IDENTIFIER_CHARS:
            continue
        known = others.pop(ident, origin)
        # The more authoritative origin wins; the id moves to its latest place.
        others[ident] = min(known, origin, key=_ORIGIN_ORDER.index)
    return by_user, list(others.items())[-MAX_OTHER_IDENTIFIERS:]


def _recent_unique(values: Sequence[str], keep: int) -> list[str]:
    """The last ``keep`` distinct values, each at its last position."""
    last = {value: index for index, value in enumerate(values)}
    return sorted(last, key=last.__getitem__)[-keep:]


def _pending(facts: ConversationFacts) -> list[str]:
    """The open steps of the latest plan: the one in view, else the reminder's."""
    if facts.plan is not None:
        return [f"[{s.status}] {s.step}" for s in facts.plan.steps if s.status != "completed"]
    return [line for line in facts.reminder_plan if not line.startswith("[completed]")]


def _progress(facts: ConversationFacts, carried: Carried) -> str:
    return (
        f"{COMPACTIONS_PREFIX}{carried.compactions + 1} (this one read "
        f"{len(facts.requests)} user request(s), {facts.assistant_messages} assistant "
        f"message(s), {facts.tool_results} tool result(s)); extracted verbatim by the offline "
        "local summarizer, no conclusions inferred."
    )


def _next_action(facts: ConversationFacts, latest: str | None) -> list[str]:
    steps = _pending(facts)
    running = [s for s in steps if s.startswith("[in_progress] ")]
    waiting = [s for s in steps if s.startswith("[pending] ")]
    if running:
        first = f"Continue the in-progress plan step: {running[0].removeprefix('[in_progress] ')}"
    elif waiting:
        first = f"Start the next pending plan step: {waiting[0].removeprefix('[pending] ')}"
    elif latest:
        first = "Continue answering the latest user request quoted above."
    else:
        first = "Wait for the user's next request."
    return [_clip(first, MAX_NEXT_ACTION_CHARS), _NEXT_ACTION_FOOTER]


def _fit(sections: list[list[_Entry]]) -> list[list[_Entry]]:
    """The sections without the entries that must go for the summary to fit the cap."""
    size = utf8_len(_render(sections))
    if size <= MAX_SUMMARY_BYTES:
        return sections
    order = sorted(
        (
            (entry.rank, entry.age, index, position)
            for index, section in enumerate(sections)
            for position, entry in enumerate(section)
            if entry.rank != PINNED
        ),
        key=lambda key: (-key[0], key[1], key[2], key[3]),
    )
    dropped: set[tuple[int, int]] = set()
    left = [len(section) for section in sections]
    for _, _, index, position in order:
        if size <= MAX_SUMMARY_BYTES:
            break
        dropped.add((index, position))
        size -= sections[index][position].size
        left[index] -= 1
        if left[index] == 0:
            size += len("None\n")
    return [
        [e for position, e in enumerate(section) if (index, position) not in dropped]
        for index, section in enumerate(sections)
    ]


def _render(sections: Sequence[Sequence[_Entry]]) -> str:
    parts = [SUMMARY_ROOT_OPEN]
    for heading, entries in zip(SUMMARY_HEADINGS, sections, strict=True):
        parts.append(heading)
        lines = [line for entry in entries for line in entry.lines]
        parts.extend(lines or ["None"])
    parts.append(SUMMARY_ROOT_CLOSE)
    return "\n".join(parts)


def local_summary(messages: Sequence[Message]) -> str:
    """A contract-valid ``<conversation_summary format_version="1">`` of ``messages``.

    ``messages`` is the summary request's conversation (the trailing instruction is ignored);
    pass ``Item``s to see file_change artifacts.
    """
    facts = extract_facts(messages)
    summary = _render(_fit(_sections(facts, read_summary(facts.earlier_summary))))
    # The fixed texts keep every summary well above the minimum; this guards future edits.
    assert len(summary) >= MIN_SUMMARY_CHARS
    return summary


def local_reply(messages: Sequence[Message]) -> str:
    """The ``local`` kind's answer to an ordinary request: it acknowledges the last request."""
    requests = extract_facts(messages).requests
    if not requests:
        return "Local model: there is no user request to answer."
    quoted = " ".join(requests[-1].split())
    return f'Local model: received your request "{_clip(quoted, 200)}". No tools were run.'
