"""What a ``POST /v1/prepare`` body carries, as the core takes it (``PrepareInput``).

Read from a validated ``PrepareBody`` (``of``) or straight from the bytes (``decode``): the
regions, which are nearly all of a large body, by the structs of ``app/api/inputs/content.py``;
everything else (the model, tools, pruning, encode, digest and the exactly-one-model rule) by
``PrepareBody`` itself, validated from a small body holding just those fields (``rest_json``),
so that only the content has a second description.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from app.api.inputs.content import MessageWire, SystemPartWire, blocks_of, items_of, raw_object
from app.api.jsonbody import BodyInput
from app.api.schemas.content import blocks_to_core, message_to_item
from app.api.schemas.models import InlineModelIn
from app.api.schemas.prepare import EncodeName, PrepareBody
from app.core.content import Item
from app.core.pipeline.prepared_call import PruningWatermark, SystemPart, ToolDefinition

__all__ = ["PrepareInput", "PrepareWire"]

_Raw = msgspec.Raw | msgspec.UnsetType


class PrepareWire(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A prepare body: its regions decoded, its other fields kept as raw JSON for the model."""

    system_context: list[SystemPartWire] = []
    conversation: list[MessageWire] = []
    tools: _Raw = msgspec.UNSET
    model: _Raw = msgspec.UNSET
    model_id: _Raw = msgspec.UNSET
    tool_result_pruning: _Raw = msgspec.UNSET
    encode: _Raw = msgspec.UNSET
    previous_request_digest: _Raw = msgspec.UNSET

    def rest_json(self) -> bytes:
        """The body without its regions, as JSON (what ``PrepareBody`` validates of it)."""
        return raw_object({name: getattr(self, name) for name in _REST})

    def input(self, rest: PrepareBody) -> PrepareInput:
        """The input of this body, ``rest`` being its ``rest_json`` validated (``NotTaken``
        when the models must read it)."""
        parts = self.system_context
        contents = blocks_of([part.content for part in parts])
        system = [SystemPart(p.key, c) for p, c in zip(parts, contents, strict=True)]
        return PrepareInput.from_parts(rest, system, items_of(self.conversation))


_REST = ("tools", "model", "model_id", "tool_result_pruning", "encode", "previous_request_digest")
_DECODER = msgspec.json.Decoder(PrepareWire)


@dataclass(frozen=True, slots=True)
class PrepareInput(BodyInput[PrepareBody]):
    """The regions as core values, the model (inline or an id) and the request's options."""

    published_as = PrepareBody

    system_context: list[SystemPart]
    conversation: list[Item]
    tools: list[ToolDefinition]
    model: InlineModelIn | None
    model_id: str | None
    pruning: PruningWatermark
    encode: EncodeName | None
    previous_request_digest: str | None

    @classmethod
    def of(cls, model: PrepareBody) -> PrepareInput:
        return cls.from_parts(
            model,
            [SystemPart(p.key, blocks_to_core(p.content)) for p in model.system_context],
            [message_to_item(m) for m in model.conversation],
        )

    @classmethod
    def decode(cls, body: bytes) -> PrepareInput | None:
        try:
            wire = _DECODER.decode(body)
            return wire.input(PrepareBody.model_validate_json(wire.rest_json()))
        except Exception:  # anything at all: declined, the models read the body and answer
            return None

    @classmethod
    def from_parts(
        cls, body: PrepareBody, system: list[SystemPart], conversation: list[Item]
    ) -> PrepareInput:
        """``body``'s fields besides the regions, with the regions given."""
        return cls(
            system,
            conversation,
            [ToolDefinition(**t.model_dump()) for t in body.tools],  # type: ignore[typeddict-item]
            body.model,
            body.model_id,
            PruningWatermark(**body.tool_result_pruning.model_dump()),
            body.encode,
            body.previous_request_digest,
        )
