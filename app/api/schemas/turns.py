"""Turns, tool results, live updates and agent messages (spec §16)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from app.api.schemas.content import ArtifactIn, OutputBlockIn
from app.api.schemas.fields import RequestModel
from app.api.schemas.shapes import NOT_BLANK, VISIBLE_TEXT_INPUT

__all__ = [
    "AgentMessageBody",
    "AgentMessageOut",
    "InputItem",
    "ToolResultIn",
    "ToolResultsBody",
    "ToolResultsOut",
    "TurnOut",
    "TurnPage",
    "TurnStart",
]


class TextInput(RequestModel):
    type: Literal["text"]
    text: str = Field(max_length=1_000_000)


class SkillInput(RequestModel):
    type: Literal["skill"]
    name: str = Field(min_length=1, max_length=64)


InputItem = Annotated[TextInput | SkillInput, Field(discriminator="type")]


class TurnStart(RequestModel):
    client_request_id: str = Field(
        min_length=1,
        max_length=200,
        pattern=NOT_BLANK,
        description="Your id for this request: sending it again returns the same turn.",
    )
    # Empty or text-less input is answered by the turn's own rule (``empty_input``, spec §6);
    # the schema states it.
    input: list[InputItem] = Field(max_length=100, json_schema_extra=VISIBLE_TEXT_INPUT)


class ToolResultIn(RequestModel):
    tool_call_id: str = Field(min_length=1)
    state: Literal["success", "error", "denied", "interrupted"]
    output: list[OutputBlockIn]
    artifacts: list[ArtifactIn] = Field(
        default_factory=list, description="For the caller only: never sent, never counted."
    )


class ToolResultsBody(RequestModel):
    """One result per pending call (partial posts are recorded), each call answered once."""

    # An empty list is answered by the turn's own rule (``no_tool_results``).
    results: list[ToolResultIn] = Field(max_length=1000, json_schema_extra={"minItems": 1})


class PendingToolCall(BaseModel):
    tool_call_id: str
    name: str
    input: str = Field(description="The raw JSON arguments as the model produced them.")


class Usage(BaseModel):
    """Σ over the turn's model calls of what the providers reported."""

    input_tokens: int = Field(description="The whole prompts, cached parts included.")
    output_tokens: int
    cached_tokens: int = Field(description="Input tokens read from the provider's prompt cache.")
    cache_creation_tokens: int = Field(
        description="Input tokens written to the provider's prompt cache (Anthropic reports "
        "them; 0 for providers that do not)."
    )
    reasoning_tokens: int


class TurnOut(BaseModel):
    turn_id: str
    session_id: str
    client_request_id: str
    status: Literal["running", "completed", "failed", "cancelled", "interrupted"]
    phase: str = Field(
        description="starting | running_model | compacting | running_tools | "
        "waiting_tool_results | terminal"
    )
    input: list[dict[str, Any]]
    outcome: dict[str, Any] | None = Field(
        description="completed: {final_text}; failed/interrupted: {code, message}; cancelled: {}"
    )
    pending_tool_calls: list[PendingToolCall]
    tool_results_deadline: str | None = Field(
        description="While the turn waits for tool results: the time by which all of them must "
        "be posted (the session agent's `tool_results_timeout_seconds` after it started "
        "waiting); past it the turn ends `failed` with `tool_results_timeout`. Null otherwise."
    )
    tool_results_remaining_seconds: float | None = Field(
        description="While waiting for tool results: seconds left until the deadline (0 once "
        "it has passed). Null otherwise."
    )
    plan: dict[str, Any] | None
    model_calls: int
    usage: Usage
    cancel_requested: bool
    created_at: str
    updated_at: str
    finished_at: str | None


class TurnPage(BaseModel):
    turns: list[TurnOut] = Field(description="Newest first.")
    next_cursor: str | None


class ToolResultsOut(TurnOut):
    missing_tool_call_ids: list[str]


class AgentMessageBody(RequestModel):
    task: str = Field(min_length=1, max_length=1000)
    kind: Literal["final_answer", "interrupted", "failed"]
    body: str
    agent_message_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="Optional id: delivering the same id again queues it only once.",
    )


class AgentMessageOut(BaseModel):
    agent_message_id: str
    status: Literal["queued"]
    duplicate: bool
    tokens: int
