"""Transcript read-back and the ``conversation_history`` model tool (spec §7.7).

A page holds raw stored messages with ``after_sequence < sequence ≤ fact boundary`` of one
checkpoint, in sequence order: never a synthetic item, never a message the summary did not
cover. ``next_after_sequence`` (the last returned sequence, only while ``has_more``) is the cursor
of the next page, so following it pages through every covered message exactly once.

The repository fetches ``limit + 1`` rows (``sequence > after AND sequence <= boundary ORDER BY
sequence``); ``transcript_page`` filters again, so a looser fetch can never leak past the
boundary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from app.core.chat_rules import MAX_SEQUENCE
from app.core.compaction.checkpoint import Checkpoint
from app.core.content import Item, RealOrigin, compact_json, content_without_artifacts
from app.core.errors import InvalidInput, NotFound
from app.core.jsontext import loads_arguments
from app.core.pipeline.prepared_call import ToolDefinition

__all__ = [
    "CONVERSATION_HISTORY_TOOL",
    "DEFAULT_TRANSCRIPT_LIMIT",
    "MAX_TRANSCRIPT_LIMIT",
    "HistoryArgumentsInvalid",
    "TranscriptPage",
    "TranscriptQuery",
    "compaction_not_found",
    "parse_conversation_history_arguments",
    "render_transcript_page",
    "transcript_page",
    "unknown_compaction_id",
]

DEFAULT_TRANSCRIPT_LIMIT = 20
MAX_TRANSCRIPT_LIMIT = 50


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _unstorable(text: str) -> bool:
    """NUL (PostgreSQL text refuses it) or an unpaired surrogate (not UTF-8): no id holds one,
    and neither database takes one even as a query parameter."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return "\0" in text


@dataclass(frozen=True, slots=True)
class TranscriptQuery:
    """Validated on construction (``InvalidInput`` ``invalid_after_sequence``, ``invalid_limit``,
    ``invalid_compaction_id``)."""

    compaction_id: str | None = None
    after_sequence: int = 0
    limit: int = DEFAULT_TRANSCRIPT_LIMIT

    def __post_init__(self) -> None:
        if not _is_int(self.after_sequence) or not 0 <= self.after_sequence <= MAX_SEQUENCE:
            raise InvalidInput(
                "invalid_after_sequence",
                f"after_sequence must be an integer between 0 and {MAX_SEQUENCE}, got "
                f"{self.after_sequence!r}",
            )
        if not _is_int(self.limit) or not 1 <= self.limit <= MAX_TRANSCRIPT_LIMIT:
            raise InvalidInput(
                "invalid_limit",
                f"limit must be between 1 and {MAX_TRANSCRIPT_LIMIT}, got {self.limit!r}",
            )
        if self.compaction_id is not None and not self.compaction_id.strip():
            raise InvalidInput("invalid_compaction_id", "compaction_id must not be blank")
        if self.compaction_id is not None and _unstorable(self.compaction_id):
            raise InvalidInput(
                "invalid_compaction_id",
                "compaction_id must not contain NUL or an unpaired surrogate",
            )


@dataclass(frozen=True, slots=True)
class TranscriptPage:
    compaction_id: str
    through_message_sequence: int
    messages: list[Item]
    has_more: bool
    next_after_sequence: int | None


def compaction_not_found(compaction_id: str | None) -> NotFound:
    """The error when the path names no checkpoint (or the session has none)."""
    if compaction_id is None:
        return NotFound(
            "compaction_not_found",
            "the session has no conversation compaction to read back; compact it first",
        )
    return NotFound(
        "compaction_not_found",
        f"conversation compaction {compaction_id} does not exist in this session; list the "
        "session's compactions for valid ids",
        compaction_id=compaction_id,
    )


def unknown_compaction_id(compaction_id: str, field: str) -> InvalidInput:
    """A checkpoint id in a request body or query (``field``) that names nothing: the request
    is wrong, the resource its path names exists (a missing path resource is the 404)."""
    return InvalidInput(
        "unknown_compaction_id",
        f"{field} names conversation compaction {compaction_id}, which does not exist in this "
        "session; list the session's compactions for valid ids",
        field=field,
        compaction_id=compaction_id,
    )


def transcript_page(
    checkpoint: Checkpoint, messages: Sequence[Item], query: TranscriptQuery
) -> TranscriptPage:
    """One page of the raw messages ``checkpoint`` covers, after ``query.after_sequence``."""
    boundary = checkpoint.through_message_sequence
    covered = sorted(
        (
            m
            for m in messages
            if isinstance(m.origin, RealOrigin)
            and m.sequence is not None
            and query.after_sequence < m.sequence <= boundary
        ),
        key=lambda m: m.sequence or 0,
    )
    page = covered[: query.limit]
    has_more = len(covered) > query.limit
    return TranscriptPage(
        compaction_id=checkpoint.compaction_id,
        through_message_sequence=boundary,
        messages=page,
        has_more=has_more,
        next_after_sequence=page[-1].sequence if has_more else None,
    )


class HistoryArgumentsInvalid(InvalidInput):
    """``conversation_history`` arguments refused with an ``invalid_arguments`` tool result."""

    def __init__(self, detail: str) -> None:
        super().__init__("invalid_arguments", detail, tool="conversation_history")


_ARGUMENT_FIELDS = ("compactionId", "afterSequence", "limit")


def parse_conversation_history_arguments(arguments: str | Mapping[str, Any]) -> TranscriptQuery:
    """The tool's camelCase arguments (raw JSON or decoded) as a ``TranscriptQuery``."""
    if isinstance(arguments, str):
        try:
            arguments = loads_arguments(arguments)
        except ValueError as exc:
            raise HistoryArgumentsInvalid(
                f"failed to parse conversation_history arguments: {exc}"
            ) from exc
    if not isinstance(arguments, Mapping):
        raise HistoryArgumentsInvalid("conversation_history arguments must be an object")
    unknown = sorted(set(arguments) - set(_ARGUMENT_FIELDS))
    if unknown:
        raise HistoryArgumentsInvalid(
            f"unknown field `{unknown[0]}`, expected one of compactionId, afterSequence, limit"
        )
    compaction_id = arguments.get("compactionId")
    after = arguments.get("afterSequence")
    limit = arguments.get("limit")
    if compaction_id is not None and not isinstance(compaction_id, str):
        raise HistoryArgumentsInvalid("compactionId must be a string")
    if after is not None and not _is_int(after):
        raise HistoryArgumentsInvalid("afterSequence must be an integer")
    if limit is not None and not _is_int(limit):
        raise HistoryArgumentsInvalid("limit must be an integer")
    try:
        return TranscriptQuery(
            compaction_id=compaction_id,
            after_sequence=0 if after is None else after,
            limit=DEFAULT_TRANSCRIPT_LIMIT if limit is None else limit,
        )
    except InvalidInput as exc:
        raise HistoryArgumentsInvalid(exc.detail) from exc


def render_transcript_page(page: TranscriptPage) -> str:
    """The tool result text: the page as compact JSON (camelCase, like the arguments).

    Artifacts are removed from tool results: they are for the caller only and never reach
    the model (spec §1), also not through read-back.
    """
    return compact_json(
        {
            "compactionId": page.compaction_id,
            "throughMessageSequence": page.through_message_sequence,
            "messages": [_message_json(m) for m in page.messages],
            "hasMore": page.has_more,
            "nextAfterSequence": page.next_after_sequence,
        }
    )


def _message_json(item: Item) -> dict[str, Any]:
    origin = item.origin
    message_id = origin.message_id if isinstance(origin, RealOrigin) else None
    return {
        "id": message_id,
        "sequence": item.sequence,
        "role": item.role,
        "kind": item.kind,
        "content": content_without_artifacts(item.content),
    }


CONVERSATION_HISTORY_TOOL: Final[ToolDefinition] = {
    "name": "conversation_history",
    # Verbatim from the original runtime (spec §7.7).
    "description": (
        "Read an exact, paginated slice of raw messages covered by a conversation compaction "
        "checkpoint. Omit compactionId to use the latest checkpoint, then follow "
        "nextAfterSequence while hasMore is true. Use this only when the compacted summary lacks "
        "an exact historical detail; it never replays tools or changes session state."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "compactionId": {
                "type": "string",
                "description": "Checkpoint to read; omit for the latest one.",
            },
            "afterSequence": {
                "type": "integer",
                "minimum": 0,
                "description": "Return messages after this sequence (default 0).",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TRANSCRIPT_LIMIT,
                "description": "Messages per page, 1 to 50 (default 20).",
            },
        },
        "additionalProperties": False,
    },
}
