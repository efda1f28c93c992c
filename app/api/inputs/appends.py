"""What a ``POST /v1/sessions/{id}/messages`` body carries, as the store takes it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import msgspec

from app.api.inputs.content import BlockWire, blocks_of, stored_artifacts_decodable
from app.api.jsonbody import BodyInput
from app.api.schemas.content import blocks_to_core
from app.api.schemas.sessions import AppendBody
from app.core.content import Block

__all__ = ["AppendInput"]


class _MessageWire(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, gc=False):
    """``AppendMessageIn``."""

    role: Literal["user", "assistant", "tool", "system"]
    kind: Literal["normal", "skill_instruction", "agent_message", "world_state"] = "normal"
    content: list[BlockWire]


class _AppendWire(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    messages: Annotated[list[_MessageWire], msgspec.Meta(min_length=1, max_length=1000)]


_DECODER = msgspec.json.Decoder(_AppendWire)


@dataclass(frozen=True, slots=True)
class AppendInput(BodyInput[AppendBody]):
    """The batch to append: each message's role, kind and content blocks."""

    published_as = AppendBody

    batch: list[tuple[str, str, list[Block]]]

    @classmethod
    def of(cls, model: AppendBody) -> AppendInput:
        return cls([(m.role, m.kind, blocks_to_core(m.content)) for m in model.messages])

    @classmethod
    def decode(cls, body: bytes) -> AppendInput | None:
        try:
            messages = _DECODER.decode(body).messages
            contents = blocks_of([m.content for m in messages])
            stored_artifacts_decodable(contents)
        except Exception:  # anything at all: declined, the models read the body and answer
            return None
        return cls([(m.role, m.kind, c) for m, c in zip(messages, contents, strict=True)])
