"""The stable prefix of a prepared request against the previous one
(``app.core.caching.prefix_record``), the
``request_digest`` a prepare answer carries, and the per-session record of the previous request.

Who compares and who writes (``docs/caching.md``, "Stable prefix and prefix_break"):
- every model call of a turn compares against the session's previous request and writes its own
  record in a step that writes anyway (``app.services.turns.step``);
- session prepare compares and writes (its request is handed to the caller to send);
- inspection (``GET .../context``) compares and writes nothing;
- the stateless prepare compares against the caller's ``previous_request_digest``;
- the summary model's requests (``GET .../compactions/request``, a compaction's own calls) are
  not the session's agent requests: they neither read nor write the record.
"""

from __future__ import annotations

from collections.abc import Sequence
from hashlib import blake2b
from operator import is_
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.caching import prefix_comparison
from app.core.caching import prefix_record as prefix
from app.core.content import Block, Item
from app.core.errors import InvalidInput
from app.core.pipeline.prepared_call import PreparedModelCall
from app.fastjson import FastEstimateCounter, content_bytes, spec_bytes, strings_only_bytes
from app.services.conversation import ActiveConversation
from app.storage.repositories.prefixes import RequestPrefixRepository

__all__ = [
    "DigestingEstimate",
    "decode_digest",
    "prefixed",
    "prefixed_extending",
    "remember",
    "request_digest",
    "rewind_of",
    "stored_previous",
]


class DigestingEstimate(FastEstimateCounter):
    """The service's estimate counter for one request whose every message the record digests
    from its JSON (the stateless prepare): the bytes it measures a message's content by are the
    very bytes its unit digests (``content_bytes`` of blocks that are strings by their schema),
    so it digests them there and then, and ``prefixed`` takes those units instead of encoding
    every content list a second time (at 1 000 messages, 1.5 MB of JSON). The same figures as
    ``ESTIMATE``, the same record; it lives as long as the request.

    The bytes themselves are not kept for the answer (which holds the same JSON): a kept
    1.5 KB buffer per message cost the measuring 3.5 ms more at 1 000 messages (fresh memory
    for each, where a dropped one is reused by the next), far more than encoding them again."""

    def __init__(self) -> None:
        self.units: prefix.KnownUnits = {}
        # The tool list it measured and its bytes: the record's tool unit digests the same.
        self.tools: tuple[list[Any], bytes] | None = None

    def measure_message(self, role: str, content: Sequence[Block]) -> int:
        data = strings_only_bytes(content)
        if data is None:
            return self.measure_content(content)
        # ``prefix.content_unit(role, data)``, from a hash already fed the role's head: the
        # same digest without building and seeding a new hash per message (this runs once
        # per message of the body).
        seeded = _SEEDED.get(role)
        if seeded is None:
            unit = prefix.content_unit(role, data)
        else:
            digest = seeded.copy()
            digest.update(data)
            unit = digest.digest()
        self.units[id(content)] = (content, role, unit)
        return len(data)

    def measure_tools(self, tools: Sequence[Any]) -> int:
        if not tools:
            return 0
        listed = list(tools)
        data = spec_bytes(listed)
        self.tools = (listed, data)
        return len(data)

    def dumps(self, value: Any) -> bytes:
        """``content_bytes`` of ``value``, the record's encoder: the tool list it measured
        (the same tool objects: ``prepare`` sends ``list(tools)``) is not encoded again. Its
        tools are never content blocks (they have no ``type``), so ``content_bytes`` of them
        is their ``spec_bytes``, which it measured."""
        kept = self.tools
        if (
            kept is not None
            and type(value) is list
            and len(value) == len(kept[0])
            and all(map(is_, value, kept[0]))
        ):
            return kept[1]
        return content_bytes(value)


# A hash per role fed ``content_unit``'s head (``c``, the role, a newline), copied per message.
_SEEDED = {
    role: blake2b(b"c" + role.encode() + b"\n", digest_size=prefix.DIGEST_BYTES)
    for role in ("system", "user", "assistant", "tool")
}


def request_digest(record: bytes) -> str:
    """The ``request_digest`` of a prepare answer
    (``app.core.caching.prefix_record.record_digest``)."""
    return prefix.record_digest(record)


def decode_digest(digest: str) -> bytes:
    """The record a caller's ``previous_request_digest`` carries; ``invalid_request_digest``
    (422) for anything a prepare answer did not return."""
    data = prefix.digest_record(digest)
    if data is None:
        raise InvalidInput(
            "invalid_request_digest",
            "previous_request_digest is not a request_digest this service returned (those "
            f"start with {prefix.DIGEST_PREFIX!r}); pass the previous answer's request_digest "
            "unchanged",
            field="previous_request_digest",
        )
    return data


def rewind_of(active: ActiveConversation) -> str | None:
    """The active checkpoint's id when it is a rewind (its items break as ``history_changed``)."""
    checkpoint = active.checkpoint
    if checkpoint is None or checkpoint.kind != "rewind":
        return None
    return checkpoint.compaction_id


def prefixed(
    prepared: PreparedModelCall,
    conversation: Sequence[Item],
    previous: bytes | None,
    *,
    identify_stored: bool,
    rewind_compaction_id: str | None = None,
) -> PreparedModelCall:
    """``prepared`` with its record and its stable prefix against ``previous`` (a record; one
    that does not decode counts as no previous request)."""
    counter = prepared.counter
    record = prefix.record_request(
        prepared,
        conversation,
        identify_stored=identify_stored,
        rewind_compaction_id=rewind_compaction_id,
        # Content and the tool list: strings by their schema, no float to look for.
        dumps=counter.dumps if isinstance(counter, DigestingEstimate) else content_bytes,
        known=counter.units if isinstance(counter, DigestingEstimate) else None,
    )
    return _compared(prepared, record, previous)


def prefixed_extending(
    prepared: PreparedModelCall,
    conversation: Sequence[Item],
    previous: bytes | None,
    basis: prefix.RecordBasis | None,
    *,
    identify_stored: bool,
    rewind_compaction_id: str | None = None,
) -> tuple[PreparedModelCall, prefix.RecordBasis]:
    """``prefixed``, with its record built on ``basis`` (an earlier record's, the same turn's
    previous request: only what is new is digested), and the basis of this one."""
    record, built = prefix.record_extending(
        prepared,
        conversation,
        basis,
        identify_stored=identify_stored,
        rewind_compaction_id=rewind_compaction_id,
        dumps=content_bytes,
    )
    return _compared(prepared, record, previous), built


def _compared(
    prepared: PreparedModelCall, record: prefix.RequestRecord, previous: bytes | None
) -> PreparedModelCall:
    comparison = prefix_comparison.compare(prepared, record, prefix.decode(previous))
    return prefix_comparison.with_prefix(prepared, record, comparison)


async def stored_previous(db: AsyncSession, session_id: str) -> bytes | None:
    """The record of the session's previous request, in ``db``'s transaction."""
    return await RequestPrefixRepository(db).get(session_id)


async def remember(db: AsyncSession, session_id: str, record: bytes | None) -> None:
    """Store ``record`` (a prepared request's) as the session's previous request, in ``db``'s
    transaction; ``None``: nothing was sent."""
    if record is not None:
        await RequestPrefixRepository(db).put(session_id, record)
