"""The offline ``local`` model: an extractive summarizer and a short deterministic reply.

No network, no randomness, no clock: the same conversation always gives the same bytes. The
summary is always contract-valid (§7.4): every extracted text is neutralized (control tags
defused, continuation lines prefixed so nothing reads as a heading), lengths are bounded, empty
sections say ``None``, and the fixed "Next Safe Action" text keeps it above 500 characters.
It is extractive on purpose: it quotes what the user asked (verbatim while it fits), the
identifiers, tool errors, edited paths and plan it can see, and carries forward the sections of
an earlier summary, but it never invents a conclusion.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from app.core.compaction._local_view import (
    ConversationFacts,
    Message,
    extract_facts,
    is_summary_request,
)
from app.core.compaction.request import SUMMARY_HEADINGS, SUMMARY_ROOT_CLOSE, SUMMARY_ROOT_OPEN
from app.core.compaction.validation import MIN_SUMMARY_CHARS

__all__ = ["is_summary_request", "local_reply", "local_summary"]

MAX_REQUESTS = 12
MAX_REQUEST_CHARS = 1_000
MAX_LATEST_REQUEST_CHARS = 2_000
MAX_ERRORS = 10
MAX_ERROR_CHARS = 300
MAX_PATHS = 64
MAX_CARRIED_CHARS = 2_000
MAX_ASSISTANT_CHARS = 1_500

# ``<`` that opens (or closes) a control tag becomes U+2039, so the text stays readable but no
# longer matches the case-insensitive check of §7.4.
_CONTROL_TAG = re.compile(
    r"<(?=/?(?:conversation_summary|system|developer|instructions|tool|assistant|user_query))",
    re.IGNORECASE | re.ASCII,
)
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CARRIED_PREFIX = "Earlier summary: "
_SOURCE_PREFIX = "Source: "

_NEXT_ACTION_FOOTER = (
    "Before acting on an exact detail this extractive summary does not state (a file content, "
    "a command output, an identifier), read it again or use conversation_history; do not "
    "repeat tool calls whose results are recorded above, and do not claim work is done unless "
    "the conversation shows it."
)


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} … [{len(text) - limit} more characters]"


def _neutralize(text: str) -> str:
    return _CONTROL_CHARS.sub("\ufffd", _CONTROL_TAG.sub("\u2039", text))


def _bullet(text: str, limit: int) -> list[str]:
    """One ``- `` item; continuation lines start with ``>`` so none can read as a heading."""
    lines = _neutralize(_clip(text.strip(), limit)).splitlines() or [""]
    return [f"- {lines[0].rstrip()}", *(f"  > {line.rstrip()}".rstrip() for line in lines[1:])]


def _carried(facts: ConversationFacts, section: int) -> list[str]:
    out: list[str] = []
    budget = MAX_CARRIED_CHARS
    for line in facts.earlier_summary.get(section, []):
        text = line.removeprefix("- ").removeprefix(_CARRIED_PREFIX)
        if text.startswith(_SOURCE_PREFIX):
            continue  # a count of messages no longer in view: noise once carried
        if budget <= 0:
            break
        out.extend(_bullet(_CARRIED_PREFIX + text, budget))
        budget -= len(text)
    return out


def _sections(facts: ConversationFacts) -> list[list[str]]:
    requests = facts.requests
    primary: list[str] = []
    if requests:
        primary += _bullet(f"Latest user request: {requests[-1]}", MAX_LATEST_REQUEST_CHARS)
        if len(requests) > 1:
            primary += _bullet(f"First user request here: {requests[0]}", MAX_REQUEST_CHARS)
    primary += _carried(facts, 0)

    concepts: list[str] = []
    if facts.identifiers:
        concepts += _bullet("Identifiers mentioned: " + ", ".join(facts.identifiers), 2_000)
    if facts.tool_counts:
        used = ", ".join(f"{name} ×{n}" for name, n in sorted(facts.tool_counts.items()))
        concepts += _bullet(f"Tools called: {used}", 1_000)
    concepts += _carried(facts, 1)

    paths = sorted(set(facts.edited_paths) | set(facts.reminder_paths))
    files = [line for p in paths[:MAX_PATHS] for line in _bullet(f"Edited: {p}", 1_100)]
    if len(paths) > MAX_PATHS:
        files.append(f"- ... {len(paths) - MAX_PATHS} more edited paths")
    files += _carried(facts, 2)

    errors = [line for e in facts.tool_errors[-MAX_ERRORS:] for line in _bullet(e, MAX_ERROR_CHARS)]
    errors += _carried(facts, 3)

    decisions = [
        f"- {_SOURCE_PREFIX}{len(requests)} user request(s), {facts.assistant_messages} assistant "
        f"message(s), {facts.tool_results} tool result(s); extracted verbatim by the offline "
        "local summarizer, no conclusions inferred."
    ]
    decisions += _carried(facts, 4)

    messages: list[str] = []
    if len(requests) > MAX_REQUESTS:
        messages.append(f"- ({len(requests) - MAX_REQUESTS} earlier user messages omitted)")
    for request in requests[-MAX_REQUESTS:]:
        messages += _bullet(request, MAX_REQUEST_CHARS)
    messages += _carried(facts, 5)

    plan = facts.plan
    open_steps = [s for s in plan.steps if s.status != "completed"] if plan else []
    pending = [line for s in open_steps for line in _bullet(f"[{s.status}] {s.step}", 1_100)]
    if plan is None:
        pending += _carried(facts, 6)

    current: list[str] = []
    if requests:
        current += _bullet(f"Answering: {requests[-1]}", 300)
    if facts.last_assistant_text:
        current += _bullet(
            f"Last assistant reply: {facts.last_assistant_text}", MAX_ASSISTANT_CHARS
        )
    # An earlier summary's Current Work and Next Safe Action are stale by now: not carried.

    return [
        primary,
        concepts,
        files,
        errors,
        decisions,
        messages,
        pending,
        current,
        _next_action(facts),
    ]


def _next_action(facts: ConversationFacts) -> list[str]:
    plan = facts.plan
    running = [s for s in plan.steps if s.status == "in_progress"] if plan else []
    waiting = [s for s in plan.steps if s.status == "pending"] if plan else []
    if running:
        first = _bullet(f"Continue the in-progress plan step: {running[0].step}", 1_100)
    elif waiting:
        first = _bullet(f"Start the next pending plan step: {waiting[0].step}", 1_100)
    elif facts.requests:
        first = ["- Continue answering the latest user request quoted above."]
    else:
        first = ["- Wait for the user's next request."]
    return [*first, f"- {_NEXT_ACTION_FOOTER}"]


def _render(sections: Iterable[list[str]]) -> str:
    parts = [SUMMARY_ROOT_OPEN]
    for heading, lines in zip(SUMMARY_HEADINGS, sections, strict=True):
        parts.append(heading)
        parts.extend(lines or ["None"])
    parts.append(SUMMARY_ROOT_CLOSE)
    return "\n".join(parts)


def local_summary(messages: Sequence[Message]) -> str:
    """A contract-valid ``<conversation_summary format_version="1">`` of ``messages``.

    ``messages`` is the summary request's conversation (the trailing instruction is ignored);
    pass ``Item``s to see file_change artifacts.
    """
    summary = _render(_sections(extract_facts(messages)))
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
