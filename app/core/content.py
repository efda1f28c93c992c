"""Content model of spec §1.

Blocks are plain JSON dicts whose keys are already in the order spec §1 lists, because the compact
JSON of those dicts is the byte basis of every estimate (spec §3.1). They are typed with
``TypedDict`` so mypy checks them while the hot path stays on plain dicts (no conversion cost).
Blocks and content lists are treated as immutable: stages copy on write and hand back the very
same object when nothing changed, which is what lets cached per-message figures be reused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

from app.core import jsontext

__all__ = [
    "ASSISTANT",
    "CONTEXTUAL_KINDS",
    "NOT_BLANK_PATTERN",
    "TOOL",
    "USER",
    "Artifact",
    "Block",
    "CachedMeasure",
    "DataBlock",
    "DataSource",
    "Item",
    "Kind",
    "Origin",
    "OutputBlock",
    "ProviderOpaqueBlock",
    "RealOrigin",
    "Role",
    "SyntheticOrigin",
    "SyntheticReason",
    "TextBlock",
    "ThinkingBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "ToolResultState",
    "blank_content",
    "compact_json",
    "content_without_artifacts",
    "is_blank",
    "text_block",
]

Role = Literal["user", "assistant", "tool"]
Kind = Literal["normal", "skill_instruction", "agent_message", "world_state"]
ToolResultState = Literal["success", "error", "interrupted", "denied"]
SyntheticReason = Literal[
    "last_user_request_replay", "compaction_summary", "system_reminder", "interrupted_tool_result"
]

USER: Role = "user"
ASSISTANT: Role = "assistant"
TOOL: Role = "tool"

# A user-role message of one of these kinds is context, never "the user's request" (spec §1).
CONTEXTUAL_KINDS: frozenset[str] = frozenset({"skill_instruction", "agent_message", "world_state"})


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


class ThinkingBlock(TypedDict):
    type: Literal["thinking"]
    thinking: str


class DataSource(TypedDict):
    """One of ``url {url, media_type}``, ``base64 {data, media_type}``, ``file_id {id}``."""

    source_type: Literal["url", "base64", "file_id"]
    url: NotRequired[str]
    data: NotRequired[str]
    media_type: NotRequired[str | None]
    id: NotRequired[str]


class DataBlock(TypedDict):
    type: Literal["data"]
    source: DataSource
    name: str | None


class ToolCallBlock(TypedDict):
    type: Literal["tool_call"]
    id: str
    name: str
    input: str  # raw JSON text as the model produced it


class Artifact(TypedDict):
    kind: str
    payload: Any


OutputBlock: TypeAlias = TextBlock | DataBlock


class ToolResultBlock(TypedDict):
    type: Literal["tool_result"]
    id: str
    name: str
    output: list[OutputBlock]
    state: ToolResultState
    # For the caller only: never sent to the model, never counted; absent in a request.
    artifacts: NotRequired[list[Artifact]]


class ProviderOpaqueBlock(TypedDict):
    type: Literal["provider_opaque"]
    driver: str
    kind: str
    payload: Any


Block: TypeAlias = (
    TextBlock | ThinkingBlock | DataBlock | ToolCallBlock | ToolResultBlock | ProviderOpaqueBlock
)


@dataclass(frozen=True, slots=True)
class RealOrigin:
    """A stored row (or a live item that has no row yet: both fields ``None``)."""

    message_id: str | None = None
    sequence: int | None = None


@dataclass(frozen=True, slots=True)
class SyntheticOrigin:
    """An item the service made: one of a compaction projection's three (spec §7.6, with the
    checkpoint's ``compaction_id``), or the ``interrupted`` result normalize gives a call that
    has none (spec §2.3; ``compaction_id`` ``None``). Never a stored row."""

    compaction_id: str | None
    reason: SyntheticReason
    source_message_id: str | None = None
    source_sequence: int | None = None


Origin: TypeAlias = RealOrigin | SyntheticOrigin


@dataclass(frozen=True, slots=True)
class CachedMeasure:
    """A per-message figure computed once (at append time) by the counter named ``counter``.

    The budget reuses it only while the item is the very object it was attached to, i.e. no
    stage rewrote it (pruned, truncated or renamed items are measured as sent).
    """

    counter: str
    measure: int


@dataclass(frozen=True, slots=True)
class Item:
    """One Conversation message."""

    role: Role
    kind: Kind
    content: list[Block]
    origin: Origin = RealOrigin()
    cached: CachedMeasure | None = None

    @property
    def sequence(self) -> int | None:
        return self.origin.sequence if isinstance(self.origin, RealOrigin) else None

    @property
    def is_user_request(self) -> bool:
        """A real user request: role user and kind normal (never decided by position)."""
        return self.role == "user" and self.kind == "normal"


# One character that is not whitespace as ``str.isspace`` defines it (which ``str.strip`` strips),
# spelled out: JSON Schema's ``\S`` (ECMA-262) and the Rust regex engine's differ from Python's
# (U+FEFF, U+001C-U+001F, U+0085), and the API schema must say exactly what ``is_blank`` means.
NOT_BLANK_PATTERN = (
    r"[^\t\n\u000b\u000c\r\u001c-\u001f \u0085\u00a0\u1680\u2000-\u200a"
    r"\u2028\u2029\u202f\u205f\u3000]"
)


def is_blank(text: str) -> bool:
    """Empty or whitespace only: says nothing (one rule for user messages, turn input and
    system parts)."""
    return not text.strip()


def blank_content(content: Sequence[Block]) -> bool:
    """No block, or only blank text blocks."""
    return all(b["type"] == "text" and is_blank(b["text"]) for b in content)


def text_block(text: str) -> TextBlock:
    return {"type": "text", "text": text}


def compact_json(value: object) -> str:
    """Compact JSON as spec §3.1 measures it: no whitespace, non-ASCII written as itself (at
    any depth: ``app.core.jsontext``)."""
    return jsontext.dumps(value)


def content_without_artifacts(content: Sequence[Block]) -> list[Block]:
    """The content as the model sees it: tool-result ``artifacts`` removed (spec §1).

    Returns the input list itself when no block carries artifacts, so callers can cheaply
    tell whether anything was dropped.
    """
    for block in content:  # a plain loop (no generator): this runs once per measured message
        if block["type"] == "tool_result" and "artifacts" in block:
            return _stripped(content)
    return content if isinstance(content, list) else list(content)


def _stripped(content: Sequence[Block]) -> list[Block]:
    out: list[Block] = []
    for block in content:
        if block["type"] == "tool_result" and "artifacts" in block:
            stripped: ToolResultBlock = {
                "type": "tool_result",
                "id": block["id"],
                "name": block["name"],
                "output": block["output"],
                "state": block["state"],
            }
            out.append(stripped)
        else:
            out.append(block)
    return out
