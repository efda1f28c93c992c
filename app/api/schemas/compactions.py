"""Compaction request bodies and response documentation (spec §17).

The routes write their JSON themselves (``json_response``); these models document it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.api.schemas.fields import PositiveSequence, RequestModel, SequenceNumber
from app.api.schemas.prepare import PrepareResponse
from app.core.limits.messages import MAX_POSTED_SUMMARY_CHARS

__all__ = [
    "CheckpointListOut",
    "CheckpointOut",
    "CheckpointSummaryOut",
    "CompactBody",
    "ReloadOut",
    "ReplayOut",
    "RewindBody",
    "SummaryRequestOut",
    "TranscriptOut",
]


# ``through_message_sequence`` only with a ``summary`` (the compaction service's own rule).
# "Not null" rather than ``type: integer`` / ``string``: the properties' own schemas give the
# types, and ReDoc, which merges ``if`` and ``then`` into each of their options, warned
# "Incompatible types in allOf" over the ``null`` one.
_COVERAGE_NEEDS_SUMMARY: dict[str, Any] = {
    "if": {
        "required": ["through_message_sequence"],
        "properties": {"through_message_sequence": {"not": {"type": "null"}}},
    },
    "then": {"required": ["summary"], "properties": {"summary": {"not": {"type": "null"}}}},
}


class CompactBody(RequestModel):
    """`{}` compacts with the session's summary model; `summary` (with the
    `through_message_sequence` it covers) installs your own model's answer."""

    model_config = ConfigDict(json_schema_extra=_COVERAGE_NEEDS_SUMMARY)

    summary: str | None = Field(
        default=None,
        max_length=MAX_POSTED_SUMMARY_CHARS,
        description="Your own model's answer to `GET .../compactions/request`; omit to let the "
        "service call the session's summary model.",
    )
    model: str | None = Field(
        default=None, max_length=200, description="Which model wrote `summary` (recorded)."
    )
    expected_through_message_sequence: SequenceNumber | None = Field(
        default=None,
        description="`through_message_sequence` of the summary request you answered; refused "
        "with 409 `conversation_changed` when the conversation has moved on since.",
    )
    through_message_sequence: PositiveSequence | None = Field(
        default=None,
        description="What `summary` covers: the `through_message_sequence` of the summary "
        "request it answers. The checkpoint is installed over that message and the ones before "
        "it; messages appended since stay in the conversation after it. Without it, the "
        "summary is taken as the answer to the last request served for the session, and "
        "refused with 409 `summary_coverage_unknown` if messages were appended since (or none "
        "was served). Only with `summary`.",
    )
    allow_larger: bool = Field(
        default=False,
        description="Install the checkpoint even when it does not make the conversation "
        "smaller (a short history is shorter than its summary, replay and reminder): without "
        "it such a compaction is refused with 409 `compaction_not_smaller`, which states both "
        "token figures, and nothing is stored.",
    )
    accept_dropped_user_facts: bool = Field(
        default=False,
        description="Install `summary` even when it drops what the user said before the "
        "checkpoint it replaces (an identifier the user named, most words of a user's "
        "constraint): without it such a summary is refused with 422 "
        "`summary_drops_user_facts`, which lists them (docs/compaction-trust.md). Ignored without "
        "`summary`.",
    )


class RewindBody(RequestModel):
    compaction_id: str = Field(min_length=1, max_length=200)


class TimingsOut(BaseModel):
    prepare_ms: int | None
    summary_ms: int | None
    persistence_ms: int | None
    install_ms: int | None


class CheckpointSummaryOut(BaseModel):
    compaction_id: str
    session_id: str
    sequence: int
    kind: Literal["manual", "threshold", "overflow", "rewind"]
    through_message_sequence: int = Field(description="Fact boundary: the last message covered.")
    replaced_through_message_sequence: int = Field(
        description="Install boundary: messages after it follow the checkpoint's three items."
    )
    source_message_count: int
    last_user_message_id: str | None
    last_user_message_sequence: int | None
    summary_format_version: int
    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    trigger_turn_id: str | None = Field(
        description="The running turn whose model call crossed the line (threshold, overflow)."
    )
    trigger_prepare_id: str | None = Field(
        description="The session prepare (`POST .../prepare`, its `prepare-<uuid32>` request id, "
        "which also names the World State messages it wrote) that crossed the line; no turn "
        "runs then, so `trigger_turn_id` is null."
    )
    parent_compaction_id: str | None
    trigger: dict[str, Any] | None = Field(
        description="Trigger evidence (threshold/overflow budget figures); null for manual."
    )
    attempts: int
    timings: TimingsOut
    conversation_tokens_before: int | None
    conversation_tokens_after: int | None
    reclaimed_conversation_tokens: int | None
    shrunk: bool | None = Field(
        description="Whether the conversation got smaller (after < before); null when the "
        "figures are unknown. An in-turn compaction that would not shrink it is never stored."
    )
    notice: str | None = Field(
        description="Set when the compaction did not shrink the conversation: says so, with "
        "the figures."
    )
    created_at: datetime


class CheckpointOut(CheckpointSummaryOut):
    summary: str
    runtime_state: dict[str, Any]
    runtime_reminder: str


class CheckpointListOut(BaseModel):
    compactions: list[CheckpointSummaryOut]
    next_before_sequence: int | None


class SummaryRequestOut(PrepareResponse):
    through_message_sequence: int = Field(
        description="The last message this request covers; name it back as "
        "`through_message_sequence` when posting the summary (messages appended meanwhile stay "
        "after the checkpoint). The session remembers the last request served."
    )
    summary_model_id: str


class ReplayItemOut(BaseModel):
    role: str
    kind: str
    content: list[dict[str, Any]]
    origin: dict[str, Any]


class ReplayOut(BaseModel):
    selector: str
    compaction_id: str | None
    through_message_sequence: int
    items: list[ReplayItemOut]


class TranscriptMessageOut(BaseModel):
    message_id: str
    sequence: int
    role: str
    kind: str
    content: list[dict[str, Any]]
    turn_id: str | None
    created_at: datetime


class TranscriptOut(BaseModel):
    compaction_id: str
    through_message_sequence: int
    messages: list[TranscriptMessageOut]
    has_more: bool
    next_after_sequence: int | None


class ReloadOut(BaseModel):
    session_id: str
    reload_required: bool
    compaction_id: str | None
