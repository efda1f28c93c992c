"""Content blocks as typed values: ``Message.blocks`` and ``RequestMessage.blocks``.

``content`` stays the list of dicts the service sent (echoed to providers byte for byte);
``blocks`` reads the same content as pydantic models, one class per block type of the content
model (text, thinking, data, tool_call, tool_result, provider_opaque), so a caller matches on
a class instead of a ``"type"`` string. A block type this client does not know (a newer
service) is an ``UnknownBlock`` with its fields kept, never an error.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ContentBlock",
    "DataBlock",
    "ProviderOpaqueBlock",
    "TextContent",
    "ThinkingBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "UnknownBlock",
    "blocks_of",
]


class _Block(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class TextContent(_Block):
    type: Literal["text"] = "text"
    text: str


class ThinkingBlock(_Block):
    type: Literal["thinking"] = "thinking"
    thinking: str = ""


class DataBlock(_Block):
    type: Literal["data"] = "data"
    # ``{source_type: url|base64|file_id, ...}``
    source: dict[str, Any]
    name: str | None = None


class ToolCallBlock(_Block):
    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    input: str  # the raw JSON text the model produced

    def arguments(self) -> Any:
        import json

        return json.loads(self.input) if self.input else {}


class ToolResultBlock(_Block):
    type: Literal["tool_result"] = "tool_result"
    id: str
    name: str = ""
    state: Literal["success", "error", "denied", "interrupted"]
    output: list[TextContent | DataBlock] = Field(default_factory=list)
    artifacts: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def text(self) -> str:
        """The output's text blocks, joined."""
        return "".join(b.text for b in self.output if isinstance(b, TextContent))


class ProviderOpaqueBlock(_Block):
    type: Literal["provider_opaque"] = "provider_opaque"
    driver: str
    kind: str
    payload: Any = None


class UnknownBlock(_Block):
    type: str


ContentBlock: TypeAlias = (
    TextContent
    | ThinkingBlock
    | DataBlock
    | ToolCallBlock
    | ToolResultBlock
    | ProviderOpaqueBlock
    | UnknownBlock
)

_BY_TYPE: dict[str, type[_Block]] = {
    "text": TextContent,
    "thinking": ThinkingBlock,
    "data": DataBlock,
    "tool_call": ToolCallBlock,
    "tool_result": ToolResultBlock,
    "provider_opaque": ProviderOpaqueBlock,
}


def blocks_of(content: Iterable[Mapping[str, Any]]) -> list[ContentBlock]:
    """Each block of ``content`` as its typed model (``UnknownBlock`` for a type not known)."""
    typed: list[ContentBlock] = []
    for block in content:
        kind = _BY_TYPE.get(str(block.get("type")), UnknownBlock)
        typed.append(kind.model_validate(dict(block)))  # type: ignore[arg-type]
    return typed
