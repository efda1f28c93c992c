"""Content blocks and messages as the API accepts them (SPEC §1).

Field order follows SPEC §1 so that ``model_dump()`` yields the canonical block dicts the core
measures; ``extra="forbid"`` turns a misspelled field into a 422 instead of silently dropping it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.content import Block, Item, Origin, RealOrigin, SyntheticOrigin

__all__ = [
    "BlockIn",
    "MessageIn",
    "OriginIn",
    "OutputBlockIn",
    "blocks_to_core",
    "message_to_item",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextBlockIn(_Strict):
    type: Literal["text"]
    text: str


class ThinkingBlockIn(_Strict):
    type: Literal["thinking"]
    thinking: str


class UrlSource(_Strict):
    source_type: Literal["url"]
    url: str = Field(min_length=1)
    media_type: str | None = None


class Base64Source(_Strict):
    source_type: Literal["base64"]
    data: str = Field(min_length=1)
    media_type: str | None = None


class FileIdSource(_Strict):
    source_type: Literal["file_id"]
    id: str = Field(min_length=1)


DataSourceIn = Annotated[
    UrlSource | Base64Source | FileIdSource, Field(discriminator="source_type")
]


class DataBlockIn(_Strict):
    type: Literal["data"]
    source: DataSourceIn
    name: str | None = None


class ToolCallBlockIn(_Strict):
    type: Literal["tool_call"]
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    input: str = Field(description="The raw JSON text of the arguments, as the model produced it.")


class ArtifactIn(_Strict):
    kind: str = Field(min_length=1)
    payload: Any = None


OutputBlockIn = Annotated[TextBlockIn | DataBlockIn, Field(discriminator="type")]


class ToolResultBlockIn(_Strict):
    type: Literal["tool_result"]
    id: str = Field(min_length=1)
    name: str = ""
    output: list[OutputBlockIn]
    state: Literal["success", "error", "interrupted", "denied"] = "success"
    artifacts: list[ArtifactIn] = Field(
        default_factory=list, description="For the caller only: never sent, never counted."
    )


class ProviderOpaqueBlockIn(_Strict):
    type: Literal["provider_opaque"]
    driver: str
    kind: str
    payload: Any = None


BlockIn = Annotated[
    TextBlockIn
    | ThinkingBlockIn
    | DataBlockIn
    | ToolCallBlockIn
    | ToolResultBlockIn
    | ProviderOpaqueBlockIn,
    Field(discriminator="type"),
]


class RealOriginIn(_Strict):
    type: Literal["real"] = "real"
    message_id: str | None = None
    sequence: int | None = Field(default=None, ge=1)


class SyntheticOriginIn(_Strict):
    type: Literal["synthetic"]
    compaction_id: str
    reason: Literal["last_user_request_replay", "compaction_summary", "system_reminder"]
    source_message_id: str | None = None
    source_sequence: int | None = None


OriginIn = Annotated[RealOriginIn | SyntheticOriginIn, Field(discriminator="type")]


class MessageIn(_Strict):
    # ``system`` is accepted by the schema so the core can refuse it with its own stable code
    # (``system_message_in_conversation``) rather than a generic validation error.
    role: Literal["user", "assistant", "tool", "system"]
    kind: Literal["normal", "skill_instruction", "agent_message", "world_state"] = "normal"
    content: list[BlockIn]
    origin: OriginIn = Field(default_factory=RealOriginIn)


def blocks_to_core(blocks: list[Any]) -> list[Block]:
    return [b.model_dump() for b in blocks]


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
