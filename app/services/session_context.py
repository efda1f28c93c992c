"""One home for a session's growing context: what this process knows of one session's active
Conversation, and the one recipe every stored prepare follows.

A session's Conversation only grows between checkpoints, and every stored path prepares it
again and again: context inspection, session prepare, a turn's first call and each of its
steps. Each of them:

1. ``load``: reads the Conversation, extending this context's last committed read with the
   messages stored since (``load_counted``: only what is new is decoded and counted), and
   stores the figures the read measured;
2. ``prepare``: prepares the request on this context's last prepared call (``extends``: the
   messages and measures of the leading items both share are taken from it) and records its
   prefix on the last record's basis (only what is new is digested), measured against the
   session's previous request;
3. ``remember``: once the transaction that read it committed, keeps the read for the next
   caller (in the process's bounded cache, ``conversation_cache``);
4. ``fit``: at the trigger line, prunes, and if still over it, compacts and samples World State
   again (spec §7.2), preparing again after each.

Every reuse is of the very objects an earlier call built from the very same inputs (stored
messages never change, items and content are never changed in place), so what a caller gets
equals a fresh read and a fresh prepare: ``tests/corpus`` replays recorded requests byte for
byte. A context is keyed by the session row (its id and ``created_at``: a session recreated with
the same id is another) and the counter (a read carries that counter's figures).

Shared by the callers of one process: what it holds is replaced whole (never changed in
place), and each piece is a hint its user checks (``load_counted`` against the session's
checkpoint, ``prepare`` and the prefix record by object identity), so a caller that finds
another caller's state gets the same result, only built from less.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.caching.prefix_record import RecordBasis
from app.core.capabilities import ModelCapabilities
from app.core.compaction.shrink import CompactionNotSmaller
from app.core.content import Item
from app.core.counting import TokenCounter
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import PreparedModelCall
from app.providers.encoding.wire import OwnedMemo, owned_by
from app.services.conversation import system_context_of, tool_surface_of, watermark_of
from app.services.request_prefix import prefixed_extending, rewind_of
from app.services.salient_memo import SALIENT_LINES
from app.services.tokens import CountedConversation, load_counted, store_counts
from app.storage.models import AgentSession

__all__ = ["ContextKey", "Fitted", "SessionContext", "fit"]

ContextKey = tuple[str, datetime, str]  # session id, its created_at, counter name


class SessionContext:
    """One session's Conversation as last read, and the last call prepared from it, for one
    counter."""

    def __init__(
        self,
        session: AgentSession,
        counter: TokenCounter,
        kept: Callable[[SessionContext], None] | None = None,
    ) -> None:
        self.key: ContextKey = (session.id, session.created_at, counter.name)
        self.counter = counter
        # The last read of a transaction that committed: the next ``load`` extends it.
        self.conversation: CountedConversation | None = None
        # The last call prepared (and its record's basis): the next ``prepare`` extends them.
        self.prepared: PreparedModelCall | None = None
        self.basis: RecordBasis | None = None
        # What the messages of the calls prepared here encode to (the adapters' memo), kept
        # and dropped with this context: a separate process-wide memo held fewer sessions
        # than the cache of contexts does, and round robin then encoded every call afresh.
        self.encoded = OwnedMemo()
        # Told when ``remember`` changes what the context holds (the cache re-sizes it).
        self._kept = kept

    async def load(
        self,
        db: AsyncSession,
        session: AgentSession,
        *,
        since: CountedConversation | None = None,
        store: bool = True,
    ) -> CountedConversation:
        """The active Conversation, read in ``db``'s transaction on ``since`` (a read of this
        very transaction) or on the last committed read; with ``store`` the figures it measured
        are written in the same transaction (a read-only caller persists them itself:
        ``tokens.persist_counts``). ``session``: the row as loaded in ``db``'s transaction."""
        counted = await load_counted(
            db, session, self.counter, since if since is not None else self.conversation
        )
        if store:
            await store_counts(db, session.id, counted)
        return counted

    def remember(self, counted: CountedConversation) -> None:
        """Keep ``counted``, read in a transaction that committed: the next ``load`` extends it."""
        self.conversation = counted
        if self._kept is not None:
            self._kept(self)

    def prepare(
        self,
        session: AgentSession,
        items: Sequence[Item],
        capabilities: ModelCapabilities,
        counted: CountedConversation,
        previous: bytes | None,
    ) -> PreparedModelCall:
        """The request for ``items`` (``counted``'s, and what was sampled into it) with its
        stable prefix against ``previous`` (the record of the session's previous request);
        kept as the call the next one extends. Raises what ``prepare`` raises."""
        conversation = list(items)
        prepared = prepare(
            system_context_of(session),
            conversation,
            tool_surface_of(session),
            capabilities,
            watermark_of(session),
            self.counter,
            extends=self.prepared,
            salient=SALIENT_LINES,
        )
        prepared, self.basis = prefixed_extending(
            prepared,
            conversation,
            previous,
            self.basis,
            identify_stored=True,
            rewind_compaction_id=rewind_of(counted.active),
        )
        self.prepared = prepared
        # The call this task makes next (and the task it starts to make it) encodes with this
        # context's memo, if the context is kept (else the process's shared memo outlives
        # it); the bytes sent are the same whichever memo holds them.
        owned_by(self.encoded if self._kept is not None else None)
        return prepared


@dataclass(frozen=True, slots=True)
class Fitted:
    """What ``fit`` ends with: the request to send, whether a compaction ran (or was tried),
    and its refusal when it would not have shrunk anything (not installed, spec §9)."""

    prepared: PreparedModelCall
    compacted: bool
    refused: CompactionNotSmaller | None = None


async def fit(
    prepared: PreparedModelCall,
    *,
    prune: Callable[[], Awaitable[bool]],
    compact: Callable[[PreparedModelCall], Awaitable[CompactionNotSmaller | None]],
    again: Callable[[int | None], Awaitable[PreparedModelCall]],
) -> Fitted:
    """Prune, and if the request still reaches the trigger line, compact and sample World State
    again (spec §7.2): the one order a turn's model call and session prepare share.

    ``prune()`` says whether it moved the watermark; ``compact(prepared)`` installs a
    checkpoint or returns the refusal; ``again(sample_index)`` prepares anew (``None``: no
    sample, after pruning; ``2``: the sample after a compaction, so the request carries World
    State again). What a refusal means (a failed turn, a refused prepare, or the request as it
    was) is the caller's to decide.
    """
    if await prune():
        prepared = await again(None)
        if not prepared.budget.reaches_auto_compact_limit:
            return Fitted(prepared, compacted=False)
    refused = await compact(prepared)
    if refused is not None:
        return Fitted(prepared, compacted=True, refused=refused)
    return Fitted(await again(2), compacted=True)
