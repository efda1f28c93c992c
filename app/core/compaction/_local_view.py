"""What the ``local`` summarizer reads from a conversation (extraction only, no rendering).

It accepts ``Item``s (preferably ``PreparedModelCall.items``, which keep tool-result artifacts)
or request message dicts ``{role, content}`` (which carry no kind, origin or artifacts: those are
inferred from the text). Nothing here raises on odd input: the ``local`` kind must always answer.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from app.core.compaction.checkpoint import SUMMARY_PREAMBLE
from app.core.compaction.reminder import REMINDER_OPEN
from app.core.compaction.request import (
    SUMMARY_HEADINGS,
    SUMMARY_INSTRUCTION,
    SUMMARY_ROOT_CLOSE,
    SUMMARY_ROOT_OPEN,
)
from app.core.compaction.runtime_state import edited_paths
from app.core.content import Block, Item, SyntheticOrigin
from app.core.errors import InvalidInput
from app.core.plan import Plan, parse_update_plan_arguments

__all__ = ["ConversationFacts", "Message", "extract_facts", "is_summary_request", "message_text"]

Message: TypeAlias = Item | Mapping[str, Any]

_IDENTIFIERS = re.compile(r"\b(?:[A-Z][A-Z0-9]+-\d+|INC\d+)\b")
MAX_IDENTIFIERS = 40

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
    requests: list[str] = field(default_factory=list)
    earlier_summary: dict[int, list[str]] = field(default_factory=dict)
    reminder_paths: list[str] = field(default_factory=list)
    edited_paths: list[str] = field(default_factory=list)
    identifiers: list[str] = field(default_factory=list)
    tool_counts: dict[str, int] = field(default_factory=dict)
    tool_errors: list[str] = field(default_factory=list)
    plan: Plan | None = None
    last_assistant_text: str | None = None
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
    return [v for v in map(_view, messages) if v.role != "system"]


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
        _collect_identifiers(view.text, facts, seen_ids)
        if view.role == "user":
            _read_user(view, facts)
        elif view.role == "assistant":
            _read_assistant(view, facts)
        elif view.role == "tool":
            _read_tool(view, facts)
    items = [m for m in messages if isinstance(m, Item)]
    facts.edited_paths = list(edited_paths(items, strict=False))
    return facts


def _collect_identifiers(text: str, facts: ConversationFacts, seen: set[str]) -> None:
    for match in _IDENTIFIERS.finditer(text):
        ident = match.group(0)
        if ident not in seen and len(facts.identifiers) < MAX_IDENTIFIERS:
            seen.add(ident)
            facts.identifiers.append(ident)


def _read_user(view: _View, facts: ConversationFacts) -> None:
    if view.reason == "compaction_summary":
        facts.earlier_summary = _summary_sections(view.text[len(SUMMARY_PREAMBLE) :])
    elif view.reason == "system_reminder":
        facts.reminder_paths = _reminder_paths(view.text)
    elif view.kind == "normal" and view.text.strip():
        facts.requests.append(view.text.strip())


def _read_assistant(view: _View, facts: ConversationFacts) -> None:
    facts.assistant_messages += 1
    if view.text.strip():
        facts.last_assistant_text = view.text.strip()
    for block in view.content:
        if block.get("type") != "tool_call":
            continue
        name = str(block.get("name", ""))
        facts.tool_counts[name] = facts.tool_counts.get(name, 0) + 1
        if name == "update_plan":
            # An invalid plan got an invalid_arguments result: the plan did not change.
            with contextlib.suppress(InvalidInput):
                facts.plan = parse_update_plan_arguments(str(block.get("input", "")))


def _read_tool(view: _View, facts: ConversationFacts) -> None:
    for block in view.content:
        if block.get("type") != "tool_result":
            continue
        facts.tool_results += 1
        state = block.get("state")
        if state in ("error", "denied"):
            output = block.get("output")
            text = message_text(output if isinstance(output, list) else [])
            facts.tool_errors.append(f"{block.get('name', 'tool')} ({state}): {text.strip()}")


def _summary_sections(text: str) -> dict[int, list[str]]:
    """Lines of each section of an earlier summary (``None`` lines dropped)."""
    start, end = text.find(SUMMARY_ROOT_OPEN), text.rfind(SUMMARY_ROOT_CLOSE)
    if start < 0:
        return {}
    body = text[start + len(SUMMARY_ROOT_OPEN) : end if end > start else len(text)]
    sections: dict[int, list[str]] = {}
    current: int | None = None
    for raw in body.splitlines():
        line = raw.strip()
        if line in SUMMARY_HEADINGS:
            current = SUMMARY_HEADINGS.index(line)
        elif current is not None and line and line != "None":
            sections.setdefault(current, []).append(line)
    return sections


def _reminder_paths(text: str) -> list[str]:
    paths: list[str] = []
    in_paths = False
    for line in text.splitlines():
        if line.startswith("## "):
            in_paths = line == "## Edited paths"
        elif in_paths and line.startswith("- ") and not line.startswith("- ... "):
            paths.append(line[2:])
    return paths
