"""Typed results: what the service answers, as pydantic models (``/openapi.json``).

Every model accepts fields it does not know (``extra="allow"``), so a newer service never breaks
an older client; ``model_extra`` holds them. Content blocks stay plain dicts in the shape of
spec §1 (``{"type": "text", "text": ...}``): they are echoed to providers byte for byte.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ctxsvc_client._blocks import ContentBlock, blocks_of

__all__ = [
    "AgentMessageReceipt",
    "AppendedMessage",
    "Budget",
    "Calibration",
    "Checkpoint",
    "CheckpointPage",
    "CheckpointSummary",
    "Context",
    "Event",
    "Message",
    "MessagePage",
    "Model",
    "PendingToolCall",
    "Prepared",
    "PreparedRequest",
    "Projection",
    "ProvenanceEntry",
    "RegionTokens",
    "ReloadResult",
    "Replay",
    "ReplayItem",
    "RequestMessage",
    "Session",
    "SessionPage",
    "SessionPrepared",
    "SessionUsage",
    "SummaryRequest",
    "TokenCount",
    "ToolResultsAnswer",
    "Transcript",
    "Turn",
    "TurnPage",
    "TurnStatus",
    "Usage",
]

Content = list[dict[str, Any]]
TurnStatus = Literal["running", "completed", "failed", "cancelled", "interrupted"]


class _Result(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


# ----- prepare answers (stateless, session prepare, context, summary request) ------------------


class RequestMessage(_Result):
    role: str
    content: Content

    @property
    def blocks(self) -> list[ContentBlock]:
        """``content`` as typed blocks (``TextContent``, ``ToolCallBlock``, …)."""
        return blocks_of(self.content)


class PreparedRequest(_Result):
    messages: list[RequestMessage]
    tools: list[dict[str, Any]]
    max_output_tokens: int


class PrefixBreak(_Result):
    """Where this request stops matching the previous one: ``index`` into
    ``request.messages`` and ``reason`` (``pruning``, ``compaction``, ``world_state``,
    ``system_changed``, ``tools_changed``, ``history_changed``)."""

    index: int
    reason: str


class Budget(_Result):
    system_context_tokens: int
    conversation_tokens: int
    tool_surface_tokens: int
    estimated_input_tokens: int
    reserved_output_tokens: int
    context_window_tokens: int
    effective_input_tokens: int
    auto_compact_token_limit: int
    reaches_auto_compact_limit: bool
    input_budget: int
    dynamic_budget: int
    dynamic_budget_exhausted: bool
    counter: str
    # How much of this request is byte-identical to the previous one (prompt caching).
    stable_prefix_tokens: int = 0
    prefix_break: PrefixBreak | None = None


class Projection(_Result):
    pruned_tool_results: int
    truncated_tool_results: int
    original_tokens: int
    projected_tokens: int
    synthesized_tool_results: int
    dropped_orphan_results: int
    filtered_data_blocks: int


class ProvenanceEntry(_Result):
    """``persisted`` (``message_id``, ``sequence``), ``synthesized`` (``reason``) or
    ``provided``; ``tokens`` is the message's share of ``budget.conversation_tokens``."""

    type: str
    tokens: int
    message_id: str | None = None
    sequence: int | None = None
    reason: str | None = None


class Prepared(_Result):
    """A prepared model call: the request, its budget, the projection report, provenance."""

    request: PreparedRequest
    budget: Budget
    projection: Projection
    provenance: list[ProvenanceEntry]
    provider_payload: dict[str, Any] | None = None
    # Pass it back as ``previous_request_digest`` of the next stateless prepare.
    request_digest: str | None = None

    @property
    def conversation(self) -> list[RequestMessage]:
        """The Conversation's messages (``provenance[i]`` describes ``conversation[i]``)."""
        return self.request.messages[len(self.request.messages) - len(self.provenance) :]


class CalibrationSample(_Result):
    estimated_input_tokens: int
    reported_input_tokens: int
    ratio: float
    created_at: datetime


class Calibration(_Result):
    counter: str
    ratio: float
    min_ratio: float
    max_ratio: float
    stddev: float
    sample_count: int
    window: int
    applied: bool
    samples: list[CalibrationSample] = Field(default_factory=list)


class Context(Prepared):
    """``GET .../context``: the next request of the active Conversation, read-only."""

    auto_compact_percent: float
    calibration: Calibration | None = None


class SessionPrepared(Prepared):
    """``POST .../prepare``: the next request after World State was sampled (and stored)."""

    auto_compact_percent: float
    world_state_message_ids: list[str] = Field(default_factory=list)


class SummaryRequest(Prepared):
    """``GET .../compactions/request``: the summary request your own model should answer."""

    through_message_sequence: int
    summary_model_id: str


class RegionTokens(_Result):
    system_context_tokens: int
    conversation_tokens: int
    tool_surface_tokens: int
    estimated_input_tokens: int


class TokenCount(_Result):
    counter: str
    tokens: int
    regions: RegionTokens | None = None


# ----- models, sessions, messages -------------------------------------------------------------


class Model(_Result):
    id: str
    context_window_tokens: int
    max_output_tokens: int
    max_reasoning_tokens: int | None
    accepts_data_blocks: bool
    fixed_reserve_tokens: int
    safety_margin_tokens: int
    output_reserve_tokens: int | None = None  # as registered; ``None``: the default rule
    token_counter: str
    prompt_caching: str = "auto"
    reasoning: bool = False  # the model reasons (Responses requests ask for its state back)
    reserved_output_tokens: int = 0  # the reserve in force: each request's output limit
    effective_input_tokens: int
    auto_compact_token_limit: int
    provider: dict[str, Any]
    builtin: bool
    calibration: Calibration | None = None


class SessionUsage(_Result):
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cache_creation_tokens: int = 0
    reasoning_tokens: int = 0
    # Calls of the compatible endpoints (their usage is in the figures above).
    proxied_calls: int = 0


class Session(_Result):
    id: str
    title: str | None
    model_id: str
    summary_model_id: str
    agent: dict[str, Any]
    workspace: dict[str, Any] | None
    sandbox: dict[str, Any]
    disabled_skills: list[str]
    tool_result_pruned_through_sequence: int | None
    message_count: int
    last_event_sequence: int = 0  # ``events(after=...)`` follows only what comes next
    reload_required: bool
    active_history_tokens: int = 0
    usage: SessionUsage = Field(default_factory=SessionUsage)
    created_at: datetime
    updated_at: datetime


class SessionPage(_Result):
    sessions: list[Session]
    next_cursor: str | None


class AppendedMessage(_Result):
    message_id: str
    sequence: int


class Message(_Result):
    message_id: str
    sequence: int
    role: str
    kind: str
    content: Content
    turn_id: str | None
    created_at: datetime

    @property
    def blocks(self) -> list[ContentBlock]:
        """``content`` as typed blocks (``TextContent``, ``ToolCallBlock``, …)."""
        return blocks_of(self.content)


class MessagePage(_Result):
    messages: list[Message]
    has_more: bool
    next_after_sequence: int | None


# ----- turns, events, agent messages ----------------------------------------------------------


class PendingToolCall(_Result):
    tool_call_id: str
    name: str
    input: str  # the raw JSON arguments, as the model produced them

    def arguments(self) -> Any:
        """``input`` parsed (raises ``ValueError`` when the model wrote invalid JSON)."""
        return json.loads(self.input)


class Usage(_Result):
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    cache_creation_tokens: int = 0


class Turn(_Result):
    turn_id: str
    session_id: str
    client_request_id: str
    status: TurnStatus
    phase: str
    input: list[dict[str, Any]]
    outcome: dict[str, Any] | None
    pending_tool_calls: list[PendingToolCall]
    plan: dict[str, Any] | None
    model_calls: int
    usage: Usage
    cancel_requested: bool
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None

    @property
    def terminal(self) -> bool:
        return self.status != "running"

    @property
    def waiting_for_tools(self) -> bool:
        return self.status == "running" and self.phase == "waiting_tool_results"

    @property
    def final_text(self) -> str | None:
        """The answer of a completed turn."""
        value = (self.outcome or {}).get("final_text")
        return value if isinstance(value, str) else None


class ToolResultsAnswer(Turn):
    missing_tool_call_ids: list[str]


class TurnPage(_Result):
    turns: list[Turn]
    next_cursor: str | None


class Event(_Result):
    """One live update. Durable ones have a ``sequence`` (the SSE id); deltas
    (``text_delta``, ``reasoning_delta``) have none and are never replayed."""

    type: str
    turn_id: str | None = None
    payload: dict[str, Any] = Field(default_factory=dict)
    sequence: int | None = None
    occurred_at: datetime | None = None


class AgentMessageReceipt(_Result):
    agent_message_id: str
    status: str
    duplicate: bool
    tokens: int


# ----- compaction -----------------------------------------------------------------------------


class CheckpointSummary(_Result):
    compaction_id: str
    session_id: str
    sequence: int
    kind: str
    through_message_sequence: int
    replaced_through_message_sequence: int
    source_message_count: int
    last_user_message_id: str | None
    last_user_message_sequence: int | None
    summary_format_version: int
    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    trigger_turn_id: str | None
    parent_compaction_id: str | None
    trigger: dict[str, Any] | None
    attempts: int
    timings: dict[str, int | None]
    conversation_tokens_before: int | None
    conversation_tokens_after: int | None
    reclaimed_conversation_tokens: int | None
    created_at: datetime


class Checkpoint(CheckpointSummary):
    summary: str
    runtime_state: dict[str, Any]
    runtime_reminder: str


class CheckpointPage(_Result):
    compactions: list[CheckpointSummary]
    next_before_sequence: int | None


class ReplayItem(_Result):
    role: str
    kind: str
    content: Content
    origin: dict[str, Any]


class Replay(_Result):
    selector: str
    compaction_id: str | None
    through_message_sequence: int
    items: list[ReplayItem]


class Transcript(_Result):
    compaction_id: str
    through_message_sequence: int
    messages: list[Message]
    has_more: bool
    next_after_sequence: int | None


class ReloadResult(_Result):
    session_id: str
    reload_required: bool
    compaction_id: str | None
