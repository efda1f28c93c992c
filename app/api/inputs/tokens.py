"""What a ``POST /v1/tokens/count`` body carries, as the core takes it (``TokenCountInput``).

Its ``content`` and ``prepare`` are read as the prepare body's are (``app/api/inputs/``); the
counter, the text and the exactly-one rule by ``TokenCountBody`` itself, from a small body
holding those fields and the prepare body without its regions.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from app.api.inputs.content import BlockWire, blocks_of, raw_object
from app.api.inputs.prepare import PrepareInput, PrepareWire
from app.api.jsonbody import BodyInput
from app.api.schemas.content import blocks_to_core
from app.api.schemas.tokens import TokenCountBody
from app.core.content import Block

__all__ = ["TokenCountInput"]

_Raw = msgspec.Raw | msgspec.UnsetType
_NULL = msgspec.Raw(b"null")


def _stand_in(value: object, given: bytes) -> _Raw:
    """What stands for a decoded field in the small body: absent, ``null``, or ``given``."""
    if value is msgspec.UNSET:
        return msgspec.UNSET
    return _NULL if value is None else msgspec.Raw(given)


class _TokenCountWire(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    counter: _Raw = msgspec.UNSET
    text: _Raw = msgspec.UNSET
    content: list[BlockWire] | msgspec.UnsetType | None = msgspec.UNSET
    prepare: PrepareWire | msgspec.UnsetType | None = msgspec.UNSET

    def rest_json(self) -> bytes:
        # A given content stands as ``[]`` (the exactly-one rule sees it given), a given
        # prepare body as itself without its regions.
        prepare = self.prepare
        return raw_object(
            {
                "counter": self.counter,
                "text": self.text,
                "content": _stand_in(self.content, b"[]"),
                "prepare": _stand_in(
                    prepare, prepare.rest_json() if isinstance(prepare, PrepareWire) else b""
                ),
            }
        )


_DECODER = msgspec.json.Decoder(_TokenCountWire)


@dataclass(frozen=True, slots=True)
class TokenCountInput(BodyInput[TokenCountBody]):
    """A counter name (or none) and exactly one of a text, a content list or a prepare body."""

    published_as = TokenCountBody

    counter: str | None
    text: str | None
    content: list[Block] | None
    prepare: PrepareInput | None

    @classmethod
    def of(cls, model: TokenCountBody) -> TokenCountInput:
        return cls(
            model.counter,
            model.text,
            None if model.content is None else blocks_to_core(model.content),
            None if model.prepare is None else PrepareInput.of(model.prepare),
        )

    @classmethod
    def decode(cls, body: bytes) -> TokenCountInput | None:
        try:
            wire = _DECODER.decode(body)
            rest = TokenCountBody.model_validate_json(wire.rest_json())
            content = None
            if isinstance(wire.content, list):
                (content,) = blocks_of([wire.content])
            prepare = None
            if isinstance(wire.prepare, PrepareWire):
                assert rest.prepare is not None  # given, so validated with the rest
                prepare = wire.prepare.input(rest.prepare)
            return cls(rest.counter, rest.text, content, prepare)
        except Exception:  # anything at all: declined, the models read the body and answer
            return None
