"""Content blocks and messages as the API accepts them (spec §1).

Field order follows spec §1 so that ``model_dump()`` yields the canonical block dicts the core
measures; ``extra="forbid"`` turns a misspelled field into a 422 instead of silently dropping it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    model_validator,
)

from app.api.schemas.fields import JsonValue, PositiveSequence, RequestModel, ToolInputText
from app.core.chat_rules import check_tool_result_placement
from app.core.compaction.runtime_state import file_change_path
from app.core.content import Block, Item, Origin, RealOrigin, SyntheticOrigin

__all__ = [
    "AnyArtifactIn",
    "ArtifactIn",
    "BlockIn",
    "ConversationIn",
    "MessageIn",
    "OriginIn",
    "OutputBlockIn",
    "StoredContentIn",
    "blocks_to_core",
    "message_to_item",
]


class TextBlockIn(RequestModel):
    type: Literal["text"]
    text: str


class ThinkingBlockIn(RequestModel):
    type: Literal["thinking"]
    thinking: str


class UrlSource(RequestModel):
    source_type: Literal["url"]
    url: str = Field(min_length=1)
    media_type: str | None = None


class Base64Source(RequestModel):
    source_type: Literal["base64"]
    data: str = Field(min_length=1)
    media_type: str | None = None


class FileIdSource(RequestModel):
    source_type: Literal["file_id"]
    id: str = Field(min_length=1)


DataSourceIn = Annotated[
    UrlSource | Base64Source | FileIdSource, Field(discriminator="source_type")
]


class DataBlockIn(RequestModel):
    type: Literal["data"]
    source: DataSourceIn
    name: str | None = None


class ToolCallBlockIn(RequestModel):
    type: Literal["tool_call"]
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    input: ToolInputText


class AnyArtifactIn(RequestModel):
    """An artifact in a body the service does not store: never sent nor counted, any payload."""

    kind: str = Field(min_length=1)
    payload: JsonValue = None


def _decodable(artifact: AnyArtifactIn) -> None:
    # Compaction's own rule (spec §7.5); its ``ValueError`` becomes a field error (422).
    file_change_path({"kind": artifact.kind, "payload": artifact.payload})


# ``runtime_state.file_change_path``'s rule, as JSON Schema.
_FILE_CHANGE: dict[str, Any] = {
    "if": {"properties": {"kind": {"const": "file_change"}}},
    "then": {
        "properties": {
            "payload": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "undone": {"type": "boolean"}},
                "required": ["path"],
            }
        },
        "required": ["payload"],
    },
}


class ArtifactIn(AnyArtifactIn):
    """An artifact the service stores: one that compaction can decode (a `file_change` has a
    `payload` object with a string `path` and an optional boolean `undone`).

    Compaction decodes every stored artifact and stored messages are never deleted, so an
    undecodable one would fail every later compaction of its session: it is refused on the way
    in (spec §8: bad input never changes stored state).
    """

    model_config = ConfigDict(json_schema_extra=_FILE_CHANGE)

    @model_validator(mode="after")
    def _check(self) -> ArtifactIn:
        _decodable(self)
        return self


OutputBlockIn = Annotated[TextBlockIn | DataBlockIn, Field(discriminator="type")]


class ToolResultBlockIn(RequestModel):
    type: Literal["tool_result"]
    id: str = Field(min_length=1)
    name: str = ""
    output: list[OutputBlockIn]
    state: Literal["success", "error", "interrupted", "denied"] = "success"
    artifacts: Sequence[AnyArtifactIn] = Field(
        default_factory=list, description="For the caller only: never sent, never counted."
    )


class ProviderOpaqueBlockIn(RequestModel):
    type: Literal["provider_opaque"]
    driver: str
    kind: str
    payload: JsonValue = None


BlockIn = Annotated[
    TextBlockIn
    | ThinkingBlockIn
    | DataBlockIn
    | ToolCallBlockIn
    | ToolResultBlockIn
    | ProviderOpaqueBlockIn,
    Field(discriminator="type"),
]


class RealOriginIn(RequestModel):
    type: Literal["real"] = "real"
    message_id: str | None = None
    sequence: PositiveSequence | None = None


class SyntheticOriginIn(RequestModel):
    type: Literal["synthetic"]
    compaction_id: str
    reason: Literal["last_user_request_replay", "compaction_summary", "system_reminder"]
    source_message_id: str | None = None
    source_sequence: PositiveSequence | None = None


def _origin_type(value: Any) -> str:
    # ``type`` may be left out of a real origin (it defaults to "real").
    if isinstance(value, dict):
        return str(value.get("type", "real"))
    return str(getattr(value, "type", "real"))


OriginIn = Annotated[
    Annotated[RealOriginIn, Tag("real")] | Annotated[SyntheticOriginIn, Tag("synthetic")],
    Discriminator(_origin_type),
]


class MessageIn(RequestModel):
    # ``system`` is accepted by the schema so the core can refuse it with its own stable code
    # (``system_message_in_conversation``) rather than a generic validation error.
    role: Literal["user", "assistant", "tool", "system"]
    kind: Literal["normal", "skill_instruction", "agent_message", "world_state"] = "normal"
    content: list[BlockIn]
    origin: OriginIn = Field(default_factory=RealOriginIn)


def _stored_artifacts_decodable(blocks: list[BlockIn]) -> list[BlockIn]:
    # ``ArtifactIn``'s rule for content that is appended: only stored artifacts are ever read.
    for block in blocks:
        if isinstance(block, ToolResultBlockIn):
            for artifact in block.artifacts:
                _decodable(artifact)
    return blocks


StoredContentIn = Annotated[list[BlockIn], AfterValidator(_stored_artifacts_decodable)]


def _tool_results_in_place(messages: list[MessageIn]) -> list[MessageIn]:
    # The store's own rule and error (``invalid_tool_message`` / ``invalid_block`` with the
    # message index), raised as is rather than as a generic validation error, so a prepare
    # refuses such a message exactly as an append of it is refused.
    for index, message in enumerate(messages):
        check_tool_result_placement(index, message.role, [b.type for b in message.content])
    return messages


ConversationIn = Annotated[list[MessageIn], AfterValidator(_tool_results_in_place)]


# One serializer call per content list (not one per block): half the cost of a large body's
# conversion to core blocks. The dicts are the same (fields in spec §1 order, defaults included).
_BLOCKS_OUT: TypeAdapter[list[Any]] = TypeAdapter(list[BlockIn])


def blocks_to_core(blocks: list[Any]) -> list[Block]:
    core: list[Block] = _BLOCKS_OUT.dump_python(blocks)
    return core


def _origin(origin: RealOriginIn | SyntheticOriginIn) -> Origin:
    if isinstance(origin, RealOriginIn):
        return RealOrigin(origin.message_id, origin.sequence)
    return SyntheticOrigin(
        origin.compaction_id, origin.reason, origin.source_message_id, origin.source_sequence
    )


def message_to_item(message: MessageIn) -> Item:
    # The role ``system`` is carried through as-is; the pipeline refuses it with its own code.
    return Item(
        role=message.role,  # type: ignore[arg-type]
        kind=message.kind,
        content=blocks_to_core(message.content),
        origin=_origin(message.origin),
    )
