"""The stable prefix of a request: how much of it is byte-identical to the previous one (spec §10).

A request is read by the provider as a sequence of *units*: the tool surface (one unit, none when
there are no tools), each system part, each Conversation message. A *record* keeps, per unit, a
short digest and a kind; comparing the record of this request with the previous request's gives
the longest common prefix of units, its tokens (``stable_prefix_tokens``) and, when the previous
request is not entirely a prefix of this one, where and why they part (``prefix_break``).

History is not serialized again: a stored message the request carries unchanged (the very object
the caller passed in, with a ``message_id``) is identified by its row (its sequence: unique in
its session and never reused), because stored content never changes and its bytes on the wire
follow from its content alone; a record is only ever compared with its own session's. Only what
a stage rewrote (pruned, truncated, filtered), what the service synthesized (a compaction's
items, an interrupted result) and a caller's item without an id are digested from their JSON as
sent; so are the tool surface and the system parts (small). A stateless caller's ids are its
own, not stored rows: that request digests every message (``identify_stored=False``), which
gives the same comparison for the same two requests.

The digests are per unit, not chained: records are fixed-width, so "the first *k* units agree"
is one comparison of two byte slices, and a chain would only add a second hash per unit.

Layout (version 1): ``>BBHI`` header (version, tool units 0/1, system parts, units), then
``units`` digests of ``DIGEST_BYTES`` each, then one kind byte per unit. A record that does not
decode (another version, a truncated or corrupt one) is no previous request (``decode``).
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from hashlib import blake2b
from operator import eq, is_, itemgetter
from typing import Any, Final

from app.core.content import Item, RealOrigin, compact_json
from app.core.pipeline.one_pass.shared_objects import leading, same_objects
from app.core.pipeline.prepared_call import PreparedModelCall

__all__ = [
    "DIGEST_BYTES",
    "DIGEST_PATTERN",
    "DIGEST_PREFIX",
    "MAX_DIGEST_CHARS",
    "VERSION",
    "KnownUnits",
    "RecordBasis",
    "RequestRecord",
    "content_unit",
    "decode",
    "digest_record",
    "record_digest",
    "record_extending",
    "record_request",
]

VERSION = 1
DIGEST_BYTES = 8  # 64 bits: a false match needs a collision at the very unit that changed
_HEADER = struct.Struct(">BBHI")
# The text form a prepare answer carries (``request_digest``): this prefix, then base64url.
DIGEST_PREFIX = f"pc{VERSION}."
DIGEST_PATTERN = rf"^pc{VERSION}\.[A-Za-z0-9_-]+$"
# The digest of the largest request a 16 MiB body can hold (a message takes ≥ 40 bytes of JSON;
# its unit 12 characters of digest) fits with room to spare.
MAX_DIGEST_CHARS = 4_000_000

# Unit kinds: they name the reason of a break, never decide equality (the digests do).
TOOLS = 1
SYSTEM = 2
STORED = 3  # a message with an id, passed through unchanged
PROVIDED = 4  # a caller's item without an id, unchanged
REWRITTEN = 5  # a real message a stage rewrote (pruned, truncated, filtered)
WORLD_STATE = 6  # a World State message
COMPACTION = 7  # an item of a compaction's projection
REWIND = 8  # an item of the projection of a rewind checkpoint
SYNTHESIZED = 9  # any other item the service made (an interrupted result)
_KINDS = frozenset(range(TOOLS, SYNTHESIZED + 1))

_COMPACTION_REASONS = frozenset(
    {"compaction_summary", "last_user_request_replay", "system_reminder"}
)


# What a message's digest starts with, before its content's JSON, by role.
_CONTENT_UNIT: Final = {
    role: b"c" + role.encode() + b"\n" for role in ("system", "user", "assistant", "tool")
}


# Units already digested, by the identity of the content list they were digested from: the
# list itself (so that an identity is never a later object's), the message's role and the unit.
KnownUnits = dict[int, tuple[Any, str, bytes]]


def content_unit(role: str, content_json: bytes) -> bytes:
    """The unit of a message digested from its content's JSON as sent (spec §3.1's bytes):
    ``c``, the role, a newline, the JSON."""
    unit = _CONTENT_UNIT.get(role) or b"c" + role.encode() + b"\n"
    # Hashed in two parts rather than joined first (a copy of every message's JSON).
    digest = blake2b(unit, digest_size=DIGEST_BYTES)
    digest.update(content_json)
    return digest.digest()


_CONTENT = itemgetter("content")
_ROLE = itemgetter("role")


def _reference_bytes(value: Any) -> bytes:
    return compact_json(value).encode()


@dataclass(frozen=True, slots=True)
class RequestRecord:
    tool_units: int  # 0 or 1
    system_parts: int
    digests: bytes  # ``units × DIGEST_BYTES``
    kinds: bytes  # one per unit

    @property
    def units(self) -> int:
        return len(self.kinds)

    def to_bytes(self) -> bytes:
        header = _HEADER.pack(VERSION, self.tool_units, self.system_parts, self.units)
        return header + self.digests + self.kinds


def decode(data: bytes | None) -> RequestRecord | None:
    """The record ``data`` holds, or ``None`` for anything that is not a version-1 record."""
    if data is None or len(data) < _HEADER.size:
        return None
    version, tool_units, system_parts, units = _HEADER.unpack_from(data)
    if (
        version != VERSION
        or tool_units > 1
        or tool_units + system_parts > units
        or len(data) != _HEADER.size + units * (DIGEST_BYTES + 1)
    ):
        return None
    start = _HEADER.size + units * DIGEST_BYTES
    kinds = bytes(data[start:])
    if not set(kinds) <= _KINDS:
        return None
    return RequestRecord(tool_units, system_parts, bytes(data[_HEADER.size : start]), kinds)


def record_digest(record: bytes) -> str:
    """The opaque ``request_digest`` of a record: ``pc1.`` and the record in base64url."""
    return DIGEST_PREFIX + base64.urlsafe_b64encode(record).rstrip(b"=").decode("ascii")


def digest_record(digest: str) -> bytes | None:
    """The record a ``request_digest`` holds, or ``None`` when ``record_digest`` never wrote it
    (another prefix or version, not canonical base64url, too long, not a record)."""
    if not digest.startswith(DIGEST_PREFIX) or len(digest) > MAX_DIGEST_CHARS:
        return None
    body = digest[len(DIGEST_PREFIX) :]
    try:
        data = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        return None
    if base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii") != body:
        return None  # a spelling no answer has (stray characters, non-zero padding bits)
    return data if decode(data) is not None else None


@dataclass(frozen=True, slots=True)
class RecordBasis:
    """What a record's Conversation units were computed from, so that the record of the next
    request of a conversation that grows (a turn's next model call) digests only what is new
    (``record_extending``). It holds the objects it compares by identity, so no
    other object can take their identities while it lives."""

    identify_stored: bool
    rewind_compaction_id: str | None
    conversation: tuple[Item, ...]  # the caller's items
    # Their identities (an item among them is the caller's own, unchanged): one set per request
    # the basis grew through, each with the items that request added (a set of the whole
    # conversation, copied on every call, cost more than the rest of an extending record).
    members: tuple[set[int], ...]
    # The request's items and its Conversation messages, as they were; and its ``items`` list
    # itself, the one a later ``prepare(extends=...)`` names (``PreparedModelCall.shared_with``:
    # a prepared call's lists are never changed in place once built on).
    items: tuple[Item, ...]
    messages: Sequence[Any]
    source: list[Item]
    digests: bytes  # the Conversation's units only
    kinds: bytes


def record_request(
    prepared: PreparedModelCall,
    conversation: Sequence[Item],
    *,
    identify_stored: bool,
    rewind_compaction_id: str | None = None,
    dumps: Callable[[Any], bytes] = _reference_bytes,
    known: KnownUnits | None = None,
) -> RequestRecord:
    """The record of ``prepared``, the request built from ``conversation`` (the caller's items).

    ``identify_stored``: a stored row that no stage changed is its sequence (or its id);
    else every message is digested from its JSON. ``rewind_compaction_id``: the active
    checkpoint when it is a rewind (its items' kind). ``dumps``: compact JSON bytes as spec §3.1
    writes them (the service passes a faster encoder of the very same bytes). ``known``: units
    ``content_unit`` already gave for some of the request's content lists (the service's
    estimate digests the bytes it measures), taken instead of encoding those lists again.
    """
    items = prepared.items
    messages = prepared.request["messages"]
    members = set(map(id, conversation))
    digests = bytearray()
    kinds = bytearray()
    _digest_items(
        items,
        messages[len(messages) - len(items) :],
        [id(item) in members for item in items],
        digests,
        kinds,
        identify_stored=identify_stored,
        rewind_compaction_id=rewind_compaction_id,
        dumps=dumps,
        known=known,
    )
    return _with_head(prepared, digests, kinds, dumps)


def record_extending(
    prepared: PreparedModelCall,
    conversation: Sequence[Item],
    extends: RecordBasis | None,
    *,
    identify_stored: bool,
    rewind_compaction_id: str | None = None,
    dumps: Callable[[Any], bytes] = _reference_bytes,
) -> tuple[RequestRecord, RecordBasis]:
    """``record_request``, built on ``extends`` (the basis of an earlier record), and the
    basis of this one.

    When ``conversation`` begins with the earlier record's conversation (the very objects)
    under the same options, the units of the leading items both requests share — the same item
    objects, carrying the same content objects under the same roles — are taken from it: an
    item's unit follows from those alone (and from whether it is the caller's own, which the
    same object in a conversation that only grew still is), so they are the very units
    computing them again would give. When ``prepare`` built this request on the one the basis
    records (``PreparedModelCall.shared_with``), it already found how many leading items (and
    their messages) are that request's very objects: they are not compared again, and a call
    costs one identity pass over the conversation plus the new items.
    """
    items = prepared.items
    messages = prepared.request["messages"]
    system_count = len(messages) - len(items)
    sent = messages[system_count:]
    reused = 0
    if (
        extends is not None
        and extends.identify_stored == identify_stored
        and extends.rewind_compaction_id == rewind_compaction_id
        and len(conversation) >= len(extends.conversation)
        and all(map(is_, extends.conversation, conversation))
    ):
        added = set(map(id, conversation[len(extends.conversation) :]))
        members = (*extends.members, added) if added else extends.members
        if prepared.shared_with is extends.source:
            reused = prepared.shares
        else:
            reused = min(
                same_objects(extends.items, items),
                same_objects(list(map(_CONTENT, extends.messages)), list(map(_CONTENT, sent))),
                leading(map(eq, map(_ROLE, extends.messages), map(_ROLE, sent))),
            )
        digests = bytearray(extends.digests[: reused * DIGEST_BYTES])
        kinds = bytearray(extends.kinds[:reused])
    else:
        members = (set(map(id, conversation)),)
        digests = bytearray()
        kinds = bytearray()
    _digest_items(
        items[reused:],
        sent[reused:],
        [any(id(item) in known for known in members) for item in items[reused:]],
        digests,
        kinds,
        identify_stored=identify_stored,
        rewind_compaction_id=rewind_compaction_id,
        dumps=dumps,
    )
    basis = RecordBasis(
        identify_stored,
        rewind_compaction_id,
        tuple(conversation),
        members,
        tuple(items),
        sent,
        items,
        bytes(digests),
        bytes(kinds),
    )
    return _with_head(prepared, digests, kinds, dumps), basis


def _with_head(
    prepared: PreparedModelCall,
    digests: bytearray,
    kinds: bytearray,
    dumps: Callable[[Any], bytes],
) -> RequestRecord:
    """The record of ``prepared`` from its Conversation's units: the tool surface's unit and
    the system parts' before them (small: digested on every call)."""
    request = prepared.request
    tools = request["tools"]
    system_count = len(request["messages"]) - len(prepared.items)
    head = bytearray()
    head_kinds = bytearray()
    if tools:
        head += blake2b(b"t" + dumps(tools), digest_size=DIGEST_BYTES).digest()
        head_kinds.append(TOOLS)
    for message in request["messages"][:system_count]:
        head += blake2b(b"s" + dumps(message["content"]), digest_size=DIGEST_BYTES).digest()
        head_kinds.append(SYSTEM)
    return RequestRecord(
        1 if tools else 0, system_count, bytes(head + digests), bytes(head_kinds + kinds)
    )


def _digest_items(
    items: Sequence[Item],
    messages: Sequence[Any],
    unchanged: Sequence[bool],
    digests: bytearray,
    kinds: bytearray,
    *,
    identify_stored: bool,
    rewind_compaction_id: str | None,
    dumps: Callable[[Any], bytes],
    known: KnownUnits | None = None,
) -> None:
    """Append the units of ``items`` (their request ``messages``; ``unchanged``: whether each is
    the caller's own object) to ``digests`` and ``kinds``."""
    append_kind = kinds.append
    for item, message, same in zip(items, messages, unchanged, strict=True):
        origin = item.origin
        # The usual message first, in as few steps as it takes: a stored row no stage changed.
        # A stored row is its sequence (unique in its session, never reused, content
        # immutable): 8 bytes, no hash.
        if (
            identify_stored
            and same
            and origin.__class__ is RealOrigin
            and origin.sequence is not None
        ):
            digests += origin.sequence.to_bytes(DIGEST_BYTES, "big", signed=True)
            append_kind(WORLD_STATE if item.kind == "world_state" else STORED)
            continue
        if isinstance(origin, RealOrigin):
            if item.kind == "world_state":
                kind = WORLD_STATE
            elif not same:
                kind = REWRITTEN
            else:
                kind = PROVIDED if origin.message_id is None else STORED
            if same and identify_stored and origin.message_id is not None:
                # An id without a sequence (not a row: a caller's) is hashed.
                unit = b"i" + origin.message_id.encode()
                digests += blake2b(unit, digest_size=DIGEST_BYTES).digest()
                append_kind(kind)
                continue
        elif origin.reason in _COMPACTION_REASONS:
            rewound = rewind_compaction_id is not None and (
                origin.compaction_id == rewind_compaction_id
            )
            kind = REWIND if rewound else COMPACTION
        else:
            kind = SYNTHESIZED
        role = message["role"]
        content = message["content"]
        if known is not None:
            entry = known.get(id(content))
            if entry is not None and entry[0] is content and entry[1] == role:
                digests += entry[2]
                append_kind(kind)
                continue
        digests += content_unit(role, dumps(content))
        append_kind(kind)
