"""What the ``local`` summarizer reads from a conversation (extraction only, no rendering).

It accepts ``Item``s (``PreparedModelCall.items``: they keep tool-result artifacts and, above
all, the stored origin and kind of every message) or request message dicts ``{role, content}``.
What a message *is* — the previous checkpoint's summary, its runtime reminder, the replayed
request, a skill — comes from its origin and kind only, never from its text (spec §1): a user
message that opens with the summary preamble or ``<system_reminder …>`` is the user's words,
quoted as such. A dict carries no origin, so every dict is a plain message of its role (and of
its ``kind`` key, if any). Nothing here raises on odd input: the ``local`` kind must always
answer.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from app.core.compaction.checkpoint import SUMMARY_PREAMBLE
from app.core.compaction.request import SUMMARY_INSTRUCTION
from app.core.compaction.runtime_state import edited_paths
from app.core.content import Block, Item, RealOrigin, SyntheticOrigin
from app.core.errors import InvalidInput
from app.core.facts import most_severe
from app.core.pipeline.salient import salient_lines_of
from app.core.turn_plan import Plan, parse_update_plan_arguments

__all__ = [
    "IDENTIFIERS",
    "IDENTIFIER_ORIGINS",
    "ConversationFacts",
    "IdentifierOrigin",
    "Message",
    "extract_facts",
    "is_summary_request",
    "message_text",
]

Message: TypeAlias = Item | Mapping[str, Any]
IdentifierOrigin: TypeAlias = Literal["user", "assistant", "tool output"]
# Most authoritative first.
IDENTIFIER_ORIGINS: tuple[IdentifierOrigin, ...] = ("user", "assistant", "tool output")

# Bounded by any non-ASCII-alphanumeric character, not ``\b``: in ``工单PAY-7731`` there is no
# word boundary between the CJK character and ``P``.
IDENTIFIERS = re.compile(r"(?<![A-Za-z0-9_])(?:[A-Z][A-Z0-9]+-\d+|INC\d+)(?![A-Za-z0-9_])")
# Error lines kept per tool result (the salient-line rule of ``app.core.pipeline.salient``).
MAX_ERROR_LINES_PER_RESULT = 3
# A salient line that is source code (``raise ValueError(...)`` in a file that was read) is not
# an error that happened.
_SOURCE_LINE = re.compile(r"^\s*(?:raise|except|catch|throw|assert|if|elif|return|def|class)\b")
# Keys of tool-call arguments that name a file.
_PATH_KEYS = ("path", "file_path", "filename", "file")


@dataclass(frozen=True, slots=True)
class _View:
    role: str
    kind: str
    reason: str | None  # the synthetic origin's reason (stored), ``None`` for a real message
    content: Sequence[Block]
    text: str
    # A real origin with no stored row: only the summary instruction the service appends.
    rowless: bool = False


@dataclass(slots=True)
class ConversationFacts:
    requests: list[str] = field(default_factory=list)  # the user's, in order; replays excluded
    earlier_summary: str | None = None  # the previous checkpoint's summary, root to close
    reminder_paths: list[str] = field(default_factory=list)
    reminder_plan: list[str] = field(default_factory=list)  # "[status] step" lines
    edited_paths: list[str] = field(default_factory=list)
    identifiers: list[str] = field(default_factory=list)  # first seen first
    # Where each identifier came from: ``user`` (the user's own words) outranks ``assistant``
    # (its text or tool-call arguments), which outranks ``tool output``.
    identifier_origins: dict[str, IdentifierOrigin] = field(default_factory=dict)
    tool_counts: dict[str, int] = field(default_factory=dict)
    tool_paths: list[str] = field(default_factory=list)  # named in tool-call arguments
    tool_errors: list[str] = field(default_factory=list)  # "name (state): line"
    plan: Plan | None = None
    assistant_texts: list[str] = field(default_factory=list)
    assistant_messages: int = 0
    tool_results: int = 0


def message_text(content: Sequence[Block]) -> str:
    texts: list[str] = []
    for block in content:
        text: object = block.get("text") if block.get("type") == "text" else None
        if isinstance(text, str):
            texts.append(text)
    return "\n".join(texts)


def _view(message: Message) -> _View:
    rowless = False
    if isinstance(message, Item):
        origin = message.origin
        reason = origin.reason if isinstance(origin, SyntheticOrigin) else None
        rowless = isinstance(origin, RealOrigin) and origin.message_id is None
        content: Sequence[Block] = message.content
        role, kind = str(message.role), str(message.kind)
    else:
        raw = message.get("content")
        content = raw if isinstance(raw, list) else []
        role, reason = str(message.get("role", "")), None
        kind = str(message.get("kind") or "normal")
        rowless = True  # a dict has no stored row to tell a user's message by
    content = [b for b in content if isinstance(b, Mapping)]
    return _View(role, kind, reason, content, message_text(content), rowless)


def _views(messages: Sequence[Message]) -> list[_View]:
    return [v for v in map(_view, messages) if v.role != "system"]


def _is_instruction(view: _View) -> bool:
    """The §7.3 instruction the service appended: row-less (a user who sends its exact text
    has a stored row, and is asking, not instructing the summarizer)."""
    return (
        view.role == "user"
        and view.rowless
        and view.reason is None
        and view.text.strip() == SUMMARY_INSTRUCTION
    )


def is_summary_request(messages: Sequence[Message]) -> bool:
    """Whether the last (non-system) message is the §7.3 summary instruction."""
    views = _views(messages)
    return bool(views) and _is_instruction(views[-1])


def extract_facts(messages: Sequence[Message]) -> ConversationFacts:
    views = _views(messages)
    if views and _is_instruction(views[-1]):
        views = views[:-1]
    facts = ConversationFacts()
    seen_ids: set[str] = set()
    for view in views:
        if view.role == "user":
            _read_user(view, facts, seen_ids)
        elif view.role == "assistant":
            _read_assistant(view, facts, seen_ids)
        elif view.role == "tool":
            _read_tool(view, facts, seen_ids)
    items = [m for m in messages if isinstance(m, Item)]
    facts.edited_paths = list(edited_paths(items))
    return facts


def _collect_identifiers(
    text: str, facts: ConversationFacts, seen: set[str], origin: IdentifierOrigin
) -> None:
    for match in IDENTIFIERS.finditer(text):
        ident = match.group(0)
        if ident not in seen:
            seen.add(ident)
            facts.identifiers.append(ident)
        known = facts.identifier_origins.get(ident)
        if known is None or IDENTIFIER_ORIGINS.index(origin) < IDENTIFIER_ORIGINS.index(known):
            facts.identifier_origins[ident] = origin


def _read_user(view: _View, facts: ConversationFacts, seen: set[str]) -> None:
    if view.reason == "compaction_summary":
        # The service wrote this item (its origin says so): its text is the preamble + summary.
        facts.earlier_summary = view.text.removeprefix(SUMMARY_PREAMBLE)
    elif view.reason == "system_reminder":
        facts.reminder_paths, facts.reminder_plan = _reminder_sections(view.text)
    elif view.reason == "last_user_request_replay":
        # A copy of a request the earlier summary already holds, not the user repeating it.
        return
    elif view.kind == "normal" and view.text.strip():
        facts.requests.append(view.text.strip())
        _collect_identifiers(view.text, facts, seen, "user")


def _read_assistant(view: _View, facts: ConversationFacts, seen: set[str]) -> None:
    facts.assistant_messages += 1
    if view.text.strip():
        facts.assistant_texts.append(view.text.strip())
        _collect_identifiers(view.text, facts, seen, "assistant")
    for block in view.content:
        if block.get("type") != "tool_call":
            continue
        name = str(block.get("name", ""))
        raw = str(block.get("input", ""))
        facts.tool_counts[name] = facts.tool_counts.get(name, 0) + 1
        _collect_identifiers(raw, facts, seen, "assistant")
        if name == "update_plan":
            # An invalid plan got an invalid_arguments result: the plan did not change.
            with contextlib.suppress(InvalidInput, RecursionError):
                facts.plan = parse_update_plan_arguments(raw)
            continue
        for path in _argument_paths(raw):
            if path not in facts.tool_paths:
                facts.tool_paths.append(path)


def _argument_paths(raw: str) -> list[str]:
    """File paths a tool call's JSON arguments name (top-level string values of path keys)."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return []
    if not isinstance(value, dict):
        return []
    found = [value.get(key) for key in _PATH_KEYS]
    return [p.strip()[:1024] for p in found if isinstance(p, str) and p.strip()]


def _read_tool(view: _View, facts: ConversationFacts, seen: set[str]) -> None:
    for block in view.content:
        if block.get("type") != "tool_result":
            continue
        facts.tool_results += 1
        state = str(block.get("state", "success"))
        output = block.get("output")
        text = message_text(output if isinstance(output, list) else [])
        # The most severe distinct lines, not the first ones (a FATAL after 29 retries).
        salient = [line.text for line in salient_lines_of(text)]
        lines = most_severe(
            [line for line in salient if _SOURCE_LINE.match(line) is None],
            MAX_ERROR_LINES_PER_RESULT,
        )
        if not lines and state != "success":
            first = next((line.strip() for line in text.splitlines() if line.strip()), "")
            lines = [first or "(no output)"]
        name = str(block.get("name", "tool"))
        label = name if state == "success" else f"{name} ({state})"
        for line in lines:
            facts.tool_errors.append(f"{label}: {line.strip()}")
            _collect_identifiers(line, facts, seen, "tool output")


def _reminder_sections(text: str) -> tuple[list[str], list[str]]:
    """The edited paths and the plan lines (``[status] step``) of a runtime reminder."""
    paths: list[str] = []
    plan: list[str] = []
    section = ""
    for line in text.splitlines():
        if line.startswith("## "):
            section = line[3:]
        elif section == "Edited paths" and line.startswith("- ") and not line.startswith("- ... "):
            paths.append(line[2:])
        elif section == "Current plan" and line.startswith("- [") and not line.startswith("- ..."):
            plan.append(line[2:])
    return paths, plan
