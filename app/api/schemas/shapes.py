"""The shapes the OpenAPI description publishes where validation is deliberately more lenient.

Some request parts are validated loosely so that the store's own rule answers with its own
stable code (``system_message_in_conversation``, ``empty_message``, ``invalid_tool_message``,
``empty_input``, ``unknown_token_counter`` ...) instead of a generic schema error. The schema
must still say exactly what is accepted (spec §11.3), so those parts publish a stricter
shape: the per-role message shapes below, ``minItems`` and ``contains`` rules. What is published
and what is accepted are kept equal by the schemathesis run over the live spec
(``tests/contract``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import Field, GetJsonSchemaHandler, TypeAdapter
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from app.api.schemas.content import (
    ArtifactIn,
    DataBlockIn,
    OriginIn,
    ProviderOpaqueBlockIn,
    RealOriginIn,
    TextBlockIn,
    ThinkingBlockIn,
    ToolCallBlockIn,
    ToolResultBlockIn,
)
from app.api.schemas.fields import RequestModel
from app.core.content import NOT_BLANK_PATTERN

__all__ = [
    "NOT_BLANK",
    "NOT_BLANK_CHAR",
    "VISIBLE_BLOCK",
    "VISIBLE_TEXT_INPUT",
    "AppendedMessageShape",
    "ConversationMessageShape",
    "DocumentedAs",
    "OneOf",
]

# One character that is neither whitespace nor U+0000 (which no store keeps; the request guard
# refuses it everywhere), and a whole string with one such character and no U+0000.
NOT_BLANK_CHAR = NOT_BLANK_PATTERN.replace("[^", r"[^\u0000", 1)
NOT_BLANK = rf"^[^\u0000]*{NOT_BLANK_CHAR}[^\u0000]*$"

# An array holding a block that is not blank text: the rule for a user message (spec §5) and a
# system context part (spec §2.4).
VISIBLE_BLOCK: dict[str, Any] = {
    "contains": {
        "anyOf": [
            {"properties": {"type": {"not": {"const": "text"}}}},
            {"properties": {"text": {"type": "string", "pattern": NOT_BLANK}}},
        ]
    }
}
# Turn input holding a text that is not blank (spec §6: skills alone are not a request).
VISIBLE_TEXT_INPUT: dict[str, Any] = {
    "minItems": 1,
    "contains": {
        "properties": {"type": {"const": "text"}, "text": {"type": "string", "pattern": NOT_BLANK}},
        "required": ["type", "text"],
    },
}


class DocumentedAs:
    """``Annotated`` marker: publish ``shape``'s schema for the field it annotates."""

    def __init__(self, shape: Any) -> None:
        self._adapter: TypeAdapter[Any] = TypeAdapter(shape)

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return handler(self._adapter.core_schema)


class OneOf:
    """``Annotated`` marker: a union of exclusive shapes is published as ``oneOf``."""

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        if "anyOf" in schema:
            schema["oneOf"] = schema.pop("anyOf")
        return schema


Kind = Literal["normal", "skill_instruction", "agent_message", "world_state"]
_Normal = Literal["normal"]

UserBlock = Annotated[
    TextBlockIn | ThinkingBlockIn | DataBlockIn | ProviderOpaqueBlockIn,
    Field(discriminator="type"),
]
AssistantBlock = Annotated[
    ThinkingBlockIn | TextBlockIn | ProviderOpaqueBlockIn | ToolCallBlockIn,
    Field(discriminator="type"),
]
ConversationBlock = Annotated[
    TextBlockIn | ThinkingBlockIn | DataBlockIn | ToolCallBlockIn | ProviderOpaqueBlockIn,
    Field(discriminator="type"),
]


class StoredToolResultBlock(ToolResultBlockIn):
    """A tool result as stored: every artifact decodable (see ``ArtifactIn``)."""

    artifacts: Sequence[ArtifactIn] = Field(
        default_factory=list, description="For the caller only: never sent, never counted."
    )


class UserMessage(RequestModel):
    """A user-role message: at least one block that is not blank text. Contextual kinds (spec
    §1) are user-role only."""

    role: Literal["user"]
    kind: Kind = "normal"
    content: Annotated[list[UserBlock], Field(min_length=1, json_schema_extra=VISIBLE_BLOCK)]


class AssistantMessage(RequestModel):
    """An assistant message: blocks in the order thinking, text, provider_opaque, tool_call
    (spec §1; another order is refused with `invalid_block_order`), tool call ids unique among
    the session's unanswered calls."""

    role: Literal["assistant"]
    kind: _Normal = "normal"
    content: list[AssistantBlock]


class ToolMessage(RequestModel):
    """A tool message: exactly one tool result, answering an unanswered call of the session."""

    role: Literal["tool"]
    kind: _Normal = "normal"
    content: Annotated[list[StoredToolResultBlock], Field(min_length=1, max_length=1)]


AppendedMessageShape = Annotated[
    UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]


class ConversationMessage(RequestModel):
    """A user or assistant item of a stateless Conversation (no tool result in it)."""

    role: Literal["user", "assistant"]
    kind: Kind = "normal"
    content: list[ConversationBlock]
    origin: OriginIn = Field(default_factory=RealOriginIn)


class ConversationToolMessage(RequestModel):
    """A tool item of a stateless Conversation: exactly one tool result."""

    role: Literal["tool"]
    kind: Kind = "normal"
    content: Annotated[list[ToolResultBlockIn], Field(min_length=1, max_length=1)]
    origin: OriginIn = Field(default_factory=RealOriginIn)


ConversationMessageShape = Annotated[
    ConversationMessage | ConversationToolMessage, Field(discriminator="role")
]
