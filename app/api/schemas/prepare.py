"""``POST /v1/prepare`` body and response (spec §13.1)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.api.schemas.content import BlockIn, ConversationIn
from app.api.schemas.fields import JsonObject, RequestModel, SequenceNumber
from app.api.schemas.models import InlineModelIn
from app.api.schemas.shapes import NOT_BLANK, VISIBLE_BLOCK, ConversationMessageShape, DocumentedAs
from app.core.caching.prefix_record import DIGEST_PATTERN, MAX_DIGEST_CHARS
from app.core.pipeline.prepared_call import BreakReason

__all__ = [
    "BudgetOut",
    "EncodeName",
    "PrefixBreakOut",
    "PrepareBody",
    "PrepareResponse",
    "ProjectionOut",
    "SpillOut",
    "StatelessPrepareResponse",
    "SystemPartIn",
    "ToolDefinitionIn",
    "ToolResultPruningIn",
]

EncodeName = Literal["openai_chat", "anthropic_messages", "openai_responses"]


class SystemPartIn(RequestModel):
    """One part of the System Context: a unique, non-blank key and content that is not only
    blank text (spec §2.4), under 10 000 tokens (§3.3)."""

    # The pipeline's own rules answer (``empty_system_context_key``/``_part``); the schema
    # states them.
    key: Annotated[
        str, Field(examples=["core/agent-system"], json_schema_extra={"pattern": NOT_BLANK})
    ]
    content: Annotated[list[BlockIn], Field(json_schema_extra={"minItems": 1, **VISIBLE_BLOCK})]


class ToolDefinitionIn(RequestModel):
    name: str = Field(min_length=1)
    description: str = ""
    input_schema: JsonObject = Field(
        default_factory=lambda: {"type": "object"},
        description="The JSON Schema of the tool's arguments.",
    )


class ToolResultPruningIn(RequestModel):
    through_sequence: SequenceNumber | None = None
    spill_directory: str | None = Field(
        default=None,
        description="The directory pruned results' markers name. The stateless endpoint writes "
        "nothing: the response's `spills` carries each full text and the path to write it to.",
    )


# Exactly one of ``model`` and ``model_id`` (the other absent or null). Said without a
# positive ``type`` in the branches: the properties' own schemas already give it, and ReDoc,
# which merges each branch into each of their options, warned "Incompatible types in allOf"
# where a branch said ``object`` over the ``null`` option.
_NOT_NULL: dict[str, Any] = {"not": {"type": "null"}}
_NULL: dict[str, Any] = {"enum": [None]}
_ONE_MODEL: dict[str, Any] = {
    "oneOf": [
        {"required": ["model"], "properties": {"model": _NOT_NULL, "model_id": _NULL}},
        {"required": ["model_id"], "properties": {"model_id": _NOT_NULL, "model": _NULL}},
    ]
}


class PrepareBody(RequestModel):
    """The three regions, the model (inline capabilities or a model id: exactly one) and the
    pruning watermark."""

    model_config = ConfigDict(json_schema_extra=_ONE_MODEL)

    system_context: list[SystemPartIn] = Field(default_factory=list)
    conversation: Annotated[ConversationIn, DocumentedAs(list[ConversationMessageShape])] = Field(
        default_factory=list
    )
    tools: list[ToolDefinitionIn] = Field(default_factory=list)
    model: InlineModelIn | None = None
    model_id: str | None = Field(default=None, description="A registered or built-in model id.")
    tool_result_pruning: ToolResultPruningIn = Field(default_factory=ToolResultPruningIn)
    encode: EncodeName | None = None
    previous_request_digest: str | None = Field(
        default=None,
        max_length=MAX_DIGEST_CHARS,
        # Stated for clients; checked (with the record inside) by the service, so that every
        # malformed digest is the one code ``invalid_request_digest``.
        json_schema_extra={"pattern": DIGEST_PATTERN},
        description="The `request_digest` of the previous answer, unchanged: the budget's "
        "`stable_prefix_tokens` and `prefix_break` are measured against that request, as a "
        f"session's are against its previous one. At most {MAX_DIGEST_CHARS:,} characters; "
        "anything a prepare answer did not return is refused (422 `invalid_request_digest`).",
    )

    @model_validator(mode="after")
    def _one_model(self) -> PrepareBody:
        if (self.model is None) == (self.model_id is None):
            raise ValueError("give exactly one of `model` (capabilities) or `model_id`")
        return self


class PrefixBreakOut(BaseModel):
    """Where this request first differs from the previous one, and why."""

    index: int = Field(
        ge=0,
        description="Index in `request.messages` (system messages included) of the first "
        "message that differs; 0 for `tools_changed`; the number of messages when this "
        "request is a strict prefix of the previous one.",
    )
    reason: BreakReason


class BudgetOut(BaseModel):
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
    stable_prefix_tokens: int = Field(
        ge=0,
        description="Tokens of the longest prefix (tools, system, messages: the order the "
        "provider reads them) byte-identical to the previous request; 0 without one.",
    )
    prefix_break: PrefixBreakOut | None = Field(
        description="`null` when the previous request (if any) is entirely a prefix of this "
        "one; else the first message that differs and why."
    )


class ProjectionOut(BaseModel):
    pruned_tool_results: int
    truncated_tool_results: int
    original_tokens: int
    projected_tokens: int
    synthesized_tool_results: int
    dropped_orphan_results: int
    filtered_data_blocks: int


class RequestMessageOut(BaseModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: list[dict[str, Any]]


class RequestOut(BaseModel):
    messages: list[RequestMessageOut]
    tools: list[dict[str, Any]]
    max_output_tokens: int


_TOKENS = Field(
    description="This message's share of `budget.conversation_tokens`, by the same counter: "
    "the entries add up to it exactly."
)


class PersistedProvenanceOut(BaseModel):
    type: Literal["persisted"]
    message_id: str
    sequence: int | None
    tokens: int = _TOKENS


class SynthesizedProvenanceOut(BaseModel):
    type: Literal["synthesized"]
    reason: Literal[
        "last_user_request_replay",
        "compaction_summary",
        "system_reminder",
        "interrupted_tool_result",
    ]
    tokens: int = _TOKENS


class ProvidedProvenanceOut(BaseModel):
    """A message the caller supplied without a `message_id`."""

    type: Literal["provided"]
    tokens: int = _TOKENS


ProvenanceOut = Annotated[
    PersistedProvenanceOut | SynthesizedProvenanceOut | ProvidedProvenanceOut,
    Field(discriminator="type"),
]


class PrepareResponse(BaseModel):
    """Documentation of the prepare response; the route writes the JSON itself (speed)."""

    request: RequestOut
    budget: BudgetOut
    projection: ProjectionOut
    provenance: list[ProvenanceOut] = Field(
        description="One entry per Conversation message: `provenance[i]` describes "
        "`request.messages[len(system_context) + i]`."
    )
    provider_payload: dict[str, Any] | None = None
    request_digest: str = Field(
        description="Opaque: this request's prefix record. Pass it as the stateless "
        "`previous_request_digest` of the next request to measure its stable prefix."
    )


class SpillOut(BaseModel):
    tool_call_id: str
    path: str = Field(description="Exactly the path the pruning marker names.")
    text: str = Field(description="The full text the marker stands for: write it to `path`.")


class StatelessPrepareResponse(PrepareResponse):
    spills: list[SpillOut] = Field(
        description="One per pruning marker that names a file (with `spill_directory` set): "
        "this endpoint stores nothing, so the caller writes each text to its path."
    )
