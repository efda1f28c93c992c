"""Exact counting in the service (spec §3.4): per-message figures computed once, and counting.

Every stored message has the estimate's figure (``content_bytes``, written by the repository).
An exact counter's figure (``token_counts[counter]``) is written at API append
(``messages.exact_counts``) for the session model's counter. Other writers — World State, the
turn runner — and messages stored before the session switched to another counter have none, so
``load_counted`` fills the gaps where every path reads the Conversation: it measures just the
messages without a figure, attaches it to their items, and returns the new figures for the caller
to persist (``store_counts``; in the caller's own transaction, or in a short one after a read-only
inspection). One read path for all writers means no writer can forget, and each message is
tokenized once per counter whatever wrote it. The figures are a cache derived from immutable
content: persisting them is invisible through the API, and concurrent fills write equal values.

``count_*`` back ``POST /v1/tokens/count``.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.capabilities import ModelCapabilities
from app.core.content import (
    Block,
    CachedMeasure,
    Item,
    RealOrigin,
    compact_json,
    content_without_artifacts,
)
from app.core.counting import ESTIMATE, CounterWrapper, TokenCounter
from app.core.errors import InvalidInput
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import Budget, PruningWatermark, SystemPart, ToolDefinition
from app.providers.tokenizers import count_text
from app.services.calibration import CalibratedCounter, base_counter
from app.services.conversation import ActiveConversation, load_active
from app.services.salient_memo import SALIENT_LINES
from app.services.session_config import conversation_view_of
from app.storage.database import SessionFactory, unit_of_work
from app.storage.models import AgentSession
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.records import StoredMessage
from app.storage.repositories.sessions import SessionRepository

__all__ = [
    "CountedConversation",
    "MemoizedCounter",
    "budget_breakdown",
    "count_prepare",
    "count_text",
    "load_counted",
    "persist_counts",
    "store_counts",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CountedConversation:
    active: ActiveConversation
    # sequence → the message's complete ``token_counts`` with the figures measured by this read.
    new_counts: dict[int, dict[str, int]] = field(default_factory=dict)

    @property
    def items(self) -> list[Item]:
        return self.active.items


async def load_counted(
    db: AsyncSession,
    session: AgentSession,
    counter: TokenCounter,
    previous: CountedConversation | None = None,
) -> CountedConversation:
    """The active Conversation with a cached figure for ``counter`` on every stored message.

    ``previous`` — the same caller's earlier read of this session with this counter, from a
    transaction that committed — is extended with the messages stored since, unless another
    checkpoint was installed in between (then everything is read again). Stored messages never
    change and sequences become visible in order (they are allocated under the session's row
    lock), so the result equals a full read; a turn then decodes each message once instead of
    the whole Conversation at every model call. ``session`` must be the row as loaded in ``db``'s
    transaction: its ``latest_compaction_id`` tells whether another checkpoint was installed.
    """
    base = base_counter(counter)
    tail = None if previous is None else await _tail(db, session, previous.active, base.name)
    if tail is None:
        active = await load_active(db, session, base.name)
        rows, items = active.stored, active.items
    else:
        rows, items = tail
    new_counts: dict[int, dict[str, int]] = {}
    measured: dict[int, CachedMeasure] = {}
    if base.name != ESTIMATE.name:
        for row in rows:
            if base.name not in row.token_counts:
                measure = base.measure_message(row.role, row.content)
                new_counts[row.sequence] = {**row.token_counts, base.name: measure}
                measured[row.sequence] = CachedMeasure(base.name, measure)
    if measured:
        items = [_with_measure(item, measured) for item in items]
    if isinstance(counter, CalibratedCounter):
        # Same measure, another name: the budget reuses a figure only under the counter's name.
        items = [_relabelled(item, counter.name) for item in items]
    if tail is None:
        return CountedConversation(replace(active, items=items), new_counts)
    assert previous is not None
    head = previous.active
    extended = replace(head, items=[*head.items, *items], stored=[*head.stored, *rows])
    return CountedConversation(extended, new_counts)


async def _tail(
    db: AsyncSession, session: AgentSession, previous: ActiveConversation, counter: str
) -> tuple[list[StoredMessage], list[Item]] | None:
    """The rows stored after ``previous`` and their items; ``None`` when the checkpoint in
    force changed (the projection must be rebuilt).

    ``session`` is the row loaded in ``db``'s transaction: its ``latest_compaction_id`` is kept
    by every checkpoint write (``CompactionRepository.add``), so no query is needed to see one."""
    checkpoint = previous.checkpoint
    if session.latest_compaction_id != previous.latest_compaction_id:
        return None
    # Messages taken back or a new epoch change what the earlier read showed: read again.
    if conversation_view_of(session) != previous.view:
        return None
    if previous.stored:
        after = previous.stored[-1].sequence
    else:
        after = max(
            previous.view.epoch_after,
            checkpoint.replaced_through_message_sequence if checkpoint else 0,
        )
    messages = MessageRepository(db)
    rows = None
    if SessionRepository(db).is_current(session):
        # A turn step reads back what it appended itself: no query when nothing else was.
        rows = messages.appended_after(session.id, after, session.last_message_sequence)
    if rows is None:
        rows = await messages.load(session.id, after_sequence=after)
    rows = previous.view.visible(rows)  # a message taken back stays hidden
    for row in rows:  # the guard of ``load_active`` (hand-edited databases)
        if row.role not in ("user", "assistant", "tool"):
            raise InvalidInput(
                "system_message_in_conversation",
                f"stored message {row.message_id} has role {row.role!r}; a Conversation never "
                "holds system messages",
            )
    return rows, [r.to_item(counter) for r in rows]


def _with_measure(item: Item, measured: dict[int, CachedMeasure]) -> Item:
    origin = item.origin
    if item.cached is None and isinstance(origin, RealOrigin) and origin.sequence in measured:
        return replace(item, cached=measured[origin.sequence])
    return item


def _relabelled(item: Item, name: str) -> Item:
    if item.cached is None:
        return item
    return replace(item, cached=CachedMeasure(name, item.cached.measure))


async def store_counts(db: AsyncSession, session_id: str, counted: CountedConversation) -> None:
    """Persist the figures ``load_counted`` measured, inside the caller's write transaction."""
    await MessageRepository(db).store_token_counts(session_id, counted.new_counts)


async def persist_counts(
    factory: SessionFactory, session_id: str, counted: CountedConversation
) -> None:
    """Persist them in a short transaction of their own (after a read-only block).

    Best effort: the figures are a cache (the next read measures again), and a read must not
    fail because it could not be stored; a failure is logged."""
    if not counted.new_counts:
        return
    try:
        async with unit_of_work(factory) as db:
            await store_counts(db, session_id, counted)
    except Exception:
        logger.warning("token counts of session %s not stored", session_id, exc_info=True)


class MemoizedCounter(CounterWrapper):
    """An exact counter that remembers message figures by a digest of (role, content as sent).

    A result that the prepare rewrites (pruned, truncated) cannot reuse its stored figure — that
    is the original's — so it is measured as sent on every prepare. The rewrite is a pure function
    of the stored content, so the same figure comes back each time: remembering it turns a repeat
    tokenization (~15 MB/s) into a digest (~1 GB/s). In ``bench/tokens.py`` that is most of the
    cached prepare's time. Bounded: the memo is dropped whole when full (figures are cheap to
    recompute, and clearing needs no lock).
    """

    __slots__ = ("_memo", "_size")

    def __init__(self, inner: TokenCounter, size: int = 65_536) -> None:
        super().__init__(inner)
        self._memo: dict[bytes, int] = {}
        self._size = size

    def measure_message(self, role: str, content: Sequence[Block]) -> int:
        key = hashlib.blake2b(
            compact_json([role, content_without_artifacts(content)]).encode(), digest_size=16
        ).digest()
        figure = self._memo.get(key)
        if figure is None:
            figure = self._inner.measure_message(role, content)
            if len(self._memo) >= self._size:
                self._memo = {}
            self._memo[key] = figure
        return figure


def budget_breakdown(budget: Budget) -> dict[str, Any]:
    """The per-region figures of a counted prepare body."""
    return {
        "system_context_tokens": budget.system_context_tokens,
        "conversation_tokens": budget.conversation_tokens,
        "tool_surface_tokens": budget.tool_surface_tokens,
        "estimated_input_tokens": budget.estimated_input_tokens,
    }


def count_prepare(
    system_context: list[SystemPart],
    conversation: list[Item],
    tools: list[ToolDefinition],
    capabilities: ModelCapabilities,
    pruning: PruningWatermark,
    counter: TokenCounter,
) -> dict[str, Any]:
    """``{counter, tokens, regions}`` of the request ``prepare()`` builds from these inputs."""
    # A request's own items: never passed again, so nothing is remembered of them.
    prepared = prepare(
        system_context,
        conversation,
        tools,
        capabilities,
        pruning,
        counter,
        remember=False,
        salient=SALIENT_LINES,
    )
    budget = prepared.budget
    return {
        "counter": budget.counter,
        "tokens": budget.estimated_input_tokens,
        "regions": budget_breakdown(budget),
    }
