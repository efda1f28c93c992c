"""What the ``local`` summarizer reads from a conversation (extraction only, no rendering).

It accepts ``Item``s (preferably ``PreparedModelCall.items``, which keep tool-result artifacts)
or request message dicts ``{role, content}`` (which carry no kind, origin or artifacts: those are
inferred from the text). Nothing here raises on odd input: the ``local`` kind must always answer.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from app.core.compaction.checkpoint import SUMMARY_PREAMBLE
from app.core.compaction.reminder import REMINDER_OPEN
from app.core.compaction.request import SUMMARY_INSTRUCTION
from app.core.compaction.runtime_state import edited_paths
from app.core.content import Block, Item, SyntheticOrigin
from app.core.errors import InvalidInput
from app.core.facts import most_severe
from app.core.plan import Plan, parse_update_plan_arguments
from app.core.salient import salient_lines_of

__all__ = [
    "IDENTIFIERS",
    "ConversationFacts",
    "Message",
    "extract_facts",
    "is_summary_request",
    "message_text",
]

Message: TypeAlias = Item | Mapping[str, Any]

# Bounded by any non-ASCII-alphanumeric character, not ``\b``: in ``工单PAY-7731`` there is no
# word boundary between the CJK character and ``P``.
IDENTIFIERS = re.compile(r"(?<![A-Za-z0-9_])(?:[A-Z][A-Z0-9]+-\d+|INC\d+)(?![A-Za-z0-9_])")
# Error lines kept per tool result (the salient-line rule of ``app.core.salient``).
MAX_ERROR_LINES_PER_RESULT = 3
# A salient line that is source code (``raise ValueError(...)`` in a file that was read) is not
# an error that happened.
_SOURCE_LINE = re.compile(r"^\s*(?:raise|except|catch|throw|assert|if|elif|return|def|class)\b")
# Keys of tool-call arguments that name a file.
_PATH_KEYS = ("path", "file_path", "filename", "file")

# Open tags of contextual user messages, to recognize them in kind-less request dicts.
_CONTEXTUAL_PREFIXES = (
    ("<skill>", "skill_instruction"),
    ("<agent_message>", "agent_message"),
    ("<user_project_context", "world_state"),
    ("<project_instructions>", "world_state"),
    ("<available_skills>", "world_state"),
    ("<sandbox_policy>", "world_state"),
)


@dataclass(frozen=True, slots=True)
class _View:
    role: str
    kind: str
    reason: str | None  # synthetic origin reason, inferred for dicts
    content: Sequence[Block]
    text: str


@dataclass(slots=True)
class ConversationFacts:
    requests: list[str] = field(default_factory=list)  # the user's, in order; replays excluded
    earlier_summary: str | None = None  # the previous checkpoint's summary, root to close
    reminder_paths: list[str] = field(default_factory=list)
    reminder_plan: list[str] = field(default_factory=list)  # "[status] step" lines
    edited_paths: list[str] = field(default_factory=list)
    identifiers: list[str] = field(default_factory=list)  # first seen first
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
    if isinstance(message, Item):
        reason = message.origin.reason if isinstance(message.origin, SyntheticOrigin) else None
        content: Sequence[Block] = message.content
        role, kind = str(message.role), str(message.kind)
    else:
        raw = message.get("content")
        content = raw if isinstance(raw, list) else []
        role, kind, reason = str(message.get("role", "")), str(message.get("kind", "")), None
    content = [b for b in content if isinstance(b, Mapping)]
    text = message_text(content)
    if not kind:
        kind = next((k for p, k in _CONTEXTUAL_PREFIXES if text.startswith(p)), "normal")
    if reason is None and role == "user":
        if text.startswith(SUMMARY_PREAMBLE):
            reason = "compaction_summary"
        elif text.startswith(REMINDER_OPEN):
            reason = "system_reminder"
    return _View(role, kind, reason, content, text)


def _views(messages: Sequence[Message]) -> list[_View]:
    views = [v for v in map(_view, messages) if v.role != "system"]
    # In kind-less dicts a replay is recognized by its place: right before the summary.
    for index, view in enumerate(views[:-1]):
        before_summary = views[index + 1].reason == "compaction_summary"
        if before_summary and view.reason is None and view.role == "user":
            replay = "last_user_request_replay"
            views[index] = _View(view.role, view.kind, replay, view.content, view.text)
    return views


def is_summary_request(messages: Sequence[Message]) -> bool:
    """Whether the last (non-system) message is the §7.3 summary instruction."""
    views = _views(messages)
    return (
        bool(views) and views[-1].role == "user" and views[-1].text.strip() == SUMMARY_INSTRUCTION
    )


def extract_facts(messages: Sequence[Message]) -> ConversationFacts:
    views = _views(messages)
    if views and views[-1].role == "user" and views[-1].text.strip() == SUMMARY_INSTRUCTION:
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


def _collect_identifiers(text: str, facts: ConversationFacts, seen: set[str]) -> None:
    for match in IDENTIFIERS.finditer(text):
        ident = match.group(0)
        if ident not in seen:
            seen.add(ident)
            facts.identifiers.append(ident)


def _read_user(view: _View, facts: ConversationFacts, seen: set[str]) -> None:
    if view.reason == "compaction_summary":
        facts.earlier_summary = view.text[len(SUMMARY_PREAMBLE) :]
    elif view.reason == "system_reminder":
        facts.reminder_paths, facts.reminder_plan = _reminder_sections(view.text)
    elif view.reason == "last_user_request_replay":
        # A copy of a request the earlier summary already holds, not the user repeating it.
        return
    elif view.kind == "normal" and view.text.strip():
        facts.requests.append(view.text.strip())
        _collect_identifiers(view.text, facts, seen)


def _read_assistant(view: _View, facts: ConversationFacts, seen: set[str]) -> None:
    facts.assistant_messages += 1
    if view.text.strip():
        facts.assistant_texts.append(view.text.strip())
        _collect_identifiers(view.text, facts, seen)
    for block in view.content:
        if block.get("type") != "tool_call":
            continue
        name = str(block.get("name", ""))
        raw = str(block.get("input", ""))
        facts.tool_counts[name] = facts.tool_counts.get(name, 0) + 1
        _collect_identifiers(raw, facts, seen)
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
            _collect_identifiers(line, facts, seen)


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
