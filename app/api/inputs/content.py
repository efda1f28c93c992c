"""Content blocks and messages read from JSON bytes straight into the core's values (msgspec).

The pydantic models of ``app/api/schemas/content.py`` are the contract: they publish the schema
and give every refusal its answer. Turning a large body into those models and then into the
core's dicts (``blocks_to_core``, ``message_to_item``) was most of a 1 000-message prepare
(7.7 ms to validate, 3.5 ms to convert, against 2.4 ms for the pipeline itself). The structs
below describe the same JSON for msgspec, which decodes it into structs at about the speed
of a plain JSON parser and turns the blocks into dicts in one C call (``to_builtins``): the
same keys in the same order, defaults included, as the models' dump.

This reading only ever *takes* a body or declines it (``NotTaken``): it takes a subset of
what the models take (a synthetic origin, an integer written ``3.0`` or a JSON ``NaN`` in a
payload, a body it cannot decode: anything it is not sure about is declined), and a declined
body is read by the models, with their errors. ``tests/api/test_body_inputs.py`` holds the
two readings equal: every body taken gives the very values the models give.

Free-form payloads (``provider_opaque``, artifacts) are kept as raw JSON and read by
pydantic-core's own parser (``from_json``), the one the models use, so they are the same values
to the last integer and float.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from typing import Annotated, Any, Literal

import msgspec
from pydantic_core import from_json

from app.api.schemas.fields import MAX_EXACT_INT
from app.core.chat_rules import check_tool_result_placement
from app.core.compaction.runtime_state import file_change_path
from app.core.content import Block, Item, RealOrigin
from app.core.errors import ServiceError
from app.core.limits.json_values import (
    MAX_JSON_CHARS,
    MAX_JSON_DEPTH,
    json_text_problem,
    json_value_problem,
)

__all__ = [
    "BlockWire",
    "MessageWire",
    "NotTaken",
    "SystemPartWire",
    "blocks_of",
    "items_of",
    "raw_object",
    "stored_artifacts_decodable",
]


class NotTaken(Exception):
    """This reading declines the body: the models read it (and answer for it)."""


class _Wire(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """An object with exactly these fields (``extra="forbid"``), in this order when dumped.

    ``gc=False``: these hold strings, numbers and other such structs only, never a cycle."""


_NonEmpty = Annotated[str, msgspec.Meta(min_length=1)]
_NULL = msgspec.Raw(b"null")


class _Text(_Wire, tag_field="type", tag="text"):
    text: str


class _Thinking(_Wire, tag_field="type", tag="thinking"):
    thinking: str


class _Url(_Wire, tag_field="source_type", tag="url"):
    url: _NonEmpty
    media_type: str | None = None


class _Base64(_Wire, tag_field="source_type", tag="base64"):
    data: _NonEmpty
    media_type: str | None = None


class _FileId(_Wire, tag_field="source_type", tag="file_id"):
    id: _NonEmpty


class _Data(_Wire, tag_field="type", tag="data"):
    source: _Url | _Base64 | _FileId
    name: str | None = None


class _ToolCall(_Wire, tag_field="type", tag="tool_call"):
    id: _NonEmpty
    name: _NonEmpty
    input: str

    def __post_init__(self) -> None:
        # ``ToolInputText``'s rule (its length bound included); declined, the model words it.
        if json_text_problem(self.input) is not None:
            raise ValueError("declined")


class _Artifact(_Wire):
    kind: _NonEmpty
    payload: msgspec.Raw = _NULL


# ``kw_only``: a required field after optional ones, in the models' order.
class _ToolResult(_Wire, tag_field="type", tag="tool_result", kw_only=True):
    id: _NonEmpty
    name: str = ""
    output: list[_Text | _Data]
    state: Literal["success", "error", "interrupted", "denied"] = "success"
    artifacts: list[_Artifact] = []


class _ProviderOpaque(_Wire, tag_field="type", tag="provider_opaque"):
    driver: str
    kind: str
    payload: msgspec.Raw = _NULL


BlockWire = _Text | _Thinking | _Data | _ToolCall | _ToolResult | _ProviderOpaque


class _RealOrigin(_Wire):
    type: Literal["real"] = "real"
    message_id: str | None = None
    sequence: Annotated[int, msgspec.Meta(ge=1, le=MAX_EXACT_INT)] | None = None


class MessageWire(_Wire, kw_only=True):
    """``MessageIn`` with a real origin (a synthetic one is declined)."""

    role: Literal["user", "assistant", "tool", "system"]
    kind: Literal["normal", "skill_instruction", "agent_message", "world_state"] = "normal"
    content: list[BlockWire]
    # Absent: the model's default (a real origin without id); ``null`` is refused, as there.
    origin: _RealOrigin | msgspec.UnsetType = msgspec.UNSET


class SystemPartWire(_Wire):
    key: str
    content: list[BlockWire]


def _payload(raw: Any) -> Any:
    # ``to_builtins`` hands over what is not a builtin: only the raw payloads are here. They
    # are read as the models read them (``JsonValue``: pydantic-core's parser, then the limits).
    if type(raw) is not msgspec.Raw:
        raise NotTaken
    data = bytes(raw)
    value = from_json(data)
    if len(data) <= MAX_JSON_CHARS and _shallow_and_exact(value):
        return value
    if json_value_problem(value) is not None:
        raise NotTaken
    return value


def _shallow_and_exact(value: Any) -> bool:
    """Whether ``json_value_problem`` of ``value``, read from at most ``MAX_JSON_CHARS`` bytes,
    is surely ``None``, found in one walk instead of its depth walk and ``json.dumps`` (a
    payload per tool result and per opaque block): no float (none is NaN or infinite) and no
    deeper than ``MAX_JSON_DEPTH``. Without floats its compact JSON is no longer than the
    bytes it was read from (strings, integers and literals are written as short or shorter,
    white space and repeated keys dropped), so within the size limit too. ``False``: ask
    ``json_value_problem``."""
    pending: list[tuple[Any, int]] = [(value, 0)]
    pop, push = pending.pop, pending.append
    while pending:
        node, depth = pop()
        kind = type(node)
        if kind is dict:
            children: Any = node.values()
        elif kind is list:
            children = node
        elif kind is str or kind is int or kind is bool or node is None:
            continue
        else:  # a float, or anything unexpected
            return False
        depth += 1
        if depth > MAX_JSON_DEPTH:
            return False
        for child in children:
            if type(child) is str:
                continue
            push((child, depth))
    return True


def blocks_of(contents: Sequence[Sequence[BlockWire]]) -> list[list[Block]]:
    """Each content list as the core's block dicts (``blocks_to_core`` of the models)."""
    blocks: list[list[Block]] = msgspec.to_builtins(contents, enc_hook=_payload)
    return blocks


def items_of(messages: Sequence[MessageWire]) -> list[Item]:
    """The messages as the core's items (``message_to_item`` of the models), after the rule
    ``ConversationIn`` applies (tool results only in tool messages)."""
    contents = blocks_of([message.content for message in messages])
    items: list[Item] = []
    append = items.append
    for index, (message, content) in enumerate(zip(messages, contents, strict=True)):
        role = message.role
        # The placement rule, looked at without a list of types per message (this loop runs
        # once per message of the body); the rule itself words any refusal.
        if role == "tool":
            placed = len(content) == 1 and content[0]["type"] == "tool_result"
        else:
            placed = True
            for block in content:
                if block["type"] == "tool_result":
                    placed = False
                    break
        if not placed:
            try:
                check_tool_result_placement(index, role, [b["type"] for b in content])
            except ServiceError as error:
                raise NotTaken from error
        origin = message.origin
        append(
            new_item(
                role,
                message.kind,
                content,
                # ``Item``'s own default (a frozen value) when the body gives no origin.
                _NO_ORIGIN
                if origin is msgspec.UNSET
                else new_origin(origin.message_id, origin.sequence),
            )
        )
    return items


_NO_ORIGIN = RealOrigin()


# ``Item`` and ``RealOrigin`` built field by field through their slots: what their constructors
# do (a frozen dataclass's ``__init__`` sets each field with ``object.__setattr__``, looked up by
# name), at half the cost — 1.2 µs an item and 0.6 µs an origin, once per message of the body.
# Only while each class is exactly the fields named here, slots, no ``__post_init__``; otherwise
# the constructors (``tests/api/test_body_inputs.py`` holds both ways equal).
_MEMBER = type(RealOrigin.__dict__["sequence"])  # a slot's descriptor


def _setters(cls: type, names: tuple[str, ...]) -> list[Callable[[Any, Any], None]] | None:
    """Each field's slot setter, when ``cls`` is exactly ``names`` in slots (else ``None``)."""
    slots = [cls.__dict__.get(name) for name in names]
    if (
        tuple(field.name for field in fields(cls)) != names
        or hasattr(cls, "__post_init__")
        or any(type(slot) is not _MEMBER for slot in slots)
    ):
        return None
    return [slot.__set__ for slot in slots]  # type: ignore[union-attr]


def _item_builder() -> Callable[[str, str, list[Block], RealOrigin], Item]:
    setters = _setters(Item, ("role", "kind", "content", "origin", "cached"))
    if setters is None:
        return Item  # type: ignore[return-value]  # ``role``: checked by the wire type
    set_role, set_kind, set_content, set_origin, set_cached = setters
    new = object.__new__

    def build(role: str, kind: str, content: list[Block], origin: RealOrigin) -> Item:
        item: Item = new(Item)
        set_role(item, role)
        set_kind(item, kind)
        set_content(item, content)
        set_origin(item, origin)
        set_cached(item, None)
        return item

    return build


def _origin_builder() -> Callable[[str | None, int | None], RealOrigin]:
    setters = _setters(RealOrigin, ("message_id", "sequence"))
    if setters is None:
        return RealOrigin
    set_message_id, set_sequence = setters
    new = object.__new__

    def build(message_id: str | None, sequence: int | None) -> RealOrigin:
        origin: RealOrigin = new(RealOrigin)
        set_message_id(origin, message_id)
        set_sequence(origin, sequence)
        return origin

    return build


new_item = _item_builder()
new_origin = _origin_builder()


def stored_artifacts_decodable(contents: Sequence[list[Block]]) -> None:
    """``StoredContentIn``'s rule: every artifact is one compaction can decode."""
    for content in contents:
        for block in content:
            if block["type"] == "tool_result":
                for artifact in block.get("artifacts", ()):
                    try:
                        file_change_path(artifact)
                    except ValueError as error:
                        raise NotTaken from error


def raw_object(fields: Mapping[str, msgspec.Raw | msgspec.UnsetType]) -> bytes:
    """A JSON object of ``fields`` (raw JSON values; an ``UNSET`` one is left out)."""
    members = [
        b'"' + name.encode() + b'":' + bytes(value)
        for name, value in fields.items()
        if value is not msgspec.UNSET
    ]
    return b"{" + b",".join(members) + b"}"
