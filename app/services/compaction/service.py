"""The compaction use cases (spec §7): manual, threshold, overflow and rewind checkpoints,
bring-your-own-model summaries, pruning, and the rebuild after a failed install.

Order of a summarizing compaction (spec §7.3–§7.6): read the source (read-only) → call the
summary model with retries (no transaction open) → store the checkpoint (one write transaction
that re-checks the preconditions) → install (after commit). A failure before the store changes
nothing; a failure in the install keeps the checkpoint and flags the session ``reload_required``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from app.core.compaction import RetryPolicy
from app.core.compaction.shrink import CompactionNotSmaller, refusal_of
from app.core.counting import TokenCounter
from app.core.errors import ServiceError, Unavailable
from app.observability import note_source
from app.observability.compactions import CompactionObserver
from app.providers.base import Usage
from app.services.compaction.checkpoint_row import Trigger, check_summary_fits, checkpoint_row
from app.services.compaction.coverage import PostedSummary, conversation_changed
from app.services.compaction.persist import (
    InstallHook,
    emit_update,
    install,
    reload_required_error,
    store_checkpoint,
)
from app.services.compaction.pruning import advance_pruning
from app.services.compaction.reads import CompactionReads
from app.services.compaction.records import checkpoint_to_json
from app.services.compaction.refusal import record_refusal
from app.services.compaction.rewind import store_rewind
from app.services.compaction.source import (
    load_source,
    require_idle,
    trigger_evidence,
)
from app.services.compaction.summary import GeneratedSummary, generate_summary
from app.services.compaction.user_facts import require_user_facts
from app.services.events import EventPublisher
from app.services.model_clients import ModelClients
from app.services.prepare import prepared_to_json
from app.settings import Settings
from app.storage.database import SessionFactory, unit_of_work
from app.storage.models import Compaction
from app.storage.repositories.compactions import CompactionRepository
from app.storage.repositories.sessions import SessionRepository

__all__ = ["CompactionService", "InstallHook"]

log = logging.getLogger(__name__)


def _ms(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)


class CompactionService(CompactionReads):
    """Implements ``app.services.ports.TurnCompactor`` and the Compaction API."""

    def __init__(
        self,
        db: SessionFactory,
        counters: Callable[[str], TokenCounter],
        clients: ModelClients,
        events: EventPublisher,
        settings: Settings,
        observer: CompactionObserver | None = None,
    ) -> None:
        self._db = db
        self._counters = counters
        self._clients = clients
        self._events = events
        # Logs, metrics and a span per compaction (``app.observability.compactions``).
        self._observer = observer
        self.policy = RetryPolicy(
            attempts=settings.summary_attempts,
            attempt_timeout_seconds=settings.summary_attempt_timeout_seconds,
            delay_seconds=settings.summary_retry_delay_seconds,
        )
        # In-process views to refresh after a checkpoint commits (see ``persist``).
        self.install_hooks: list[InstallHook] = []

    # ----- TurnCompactor ----------------------------------------------------------------------

    async def prune(self, session_id: str) -> bool:
        """spec §7.2: advance the pruning watermark; any failure = "no pruning this time"."""
        try:
            async with unit_of_work(self._db) as db:
                return await advance_pruning(db, session_id)
        except Exception:
            log.warning(
                "tool result pruning skipped; falling back to summary compaction",
                exc_info=True,
                extra={"fields": {"session_id": session_id}},
            )
            return False

    async def compact_in_turn(
        self,
        session_id: str,
        *,
        trigger: Literal["threshold", "overflow"],
        turn_id: str,
        evidence: dict[str, Any],
    ) -> None:
        """Summarize and install a checkpoint linked to the running turn ``turn_id``.

        Raises ``CompactionNotSmaller`` (nothing stored) when the summary would not make the
        conversation smaller (spec §9): the caller goes on without it or fails the turn.
        """
        await self._compact_triggered(session_id, trigger, evidence, turn_id=turn_id)

    async def compact_for_prepare(
        self, session_id: str, *, prepare_id: str, evidence: dict[str, Any]
    ) -> None:
        """Summarize and install a ``threshold`` checkpoint for the session prepare
        ``prepare_id`` (no turn runs: the checkpoint and its live updates name the prepare)."""
        await self._compact_triggered(session_id, "threshold", evidence, prepare_id=prepare_id)

    async def _compact_triggered(
        self,
        session_id: str,
        trigger: Literal["threshold", "overflow"],
        evidence: dict[str, Any],
        *,
        turn_id: str | None = None,
        prepare_id: str | None = None,
    ) -> None:
        link = {"turn_id": turn_id, "prepare_id": prepare_id}
        started = {"kind": trigger}
        await emit_update(self._db, self._events, session_id, "compaction_started", started, **link)
        try:
            await self._observed(
                self._summarize(
                    session_id,
                    kind=trigger,
                    evidence=evidence,
                    turn_id=turn_id,
                    prepare_id=prepare_id,
                ),
                trigger,
                session_id,
            )
        except CompactionNotSmaller:
            raise  # its own update is recorded (``refusal``)
        except ServiceError as exc:
            failed = {"status": "failed", "kind": trigger, "code": exc.code, "detail": exc.detail}
            await emit_update(
                self._db, self._events, session_id, "compaction_finished", failed, **link
            )
            raise

    # ----- manual and bring-your-own-model ------------------------------------------------------

    async def compact(
        self,
        session_id: str,
        *,
        summary: str | None = None,
        model: str | None = None,
        expected_through_message_sequence: int | None = None,
        through_message_sequence: int | None = None,
        accept_dropped_user_facts: bool = False,
        allow_larger: bool = False,
    ) -> dict[str, Any]:
        """Manual compaction: with the session's summary model, or with ``summary`` (the answer of
        the caller's own model to ``summary_request``), installed over what that request covered
        (``coverage.PostedSummary``) when it keeps the user facts of the checkpoint it replaces
        (``user_facts``) or the caller accepts their loss; refused with ``compaction_not_smaller``
        when it would not shrink the conversation, unless ``allow_larger``."""
        posted, expected = PostedSummary.of_post(
            summary, through_message_sequence, expected_through_message_sequence
        )
        row = await self._observed(
            self._summarize(
                session_id,
                kind="manual",
                posted=posted,
                provided_model=model,
                expected_through=expected,
                accept_dropped_user_facts=accept_dropped_user_facts,
                allow_larger=allow_larger,
            ),
            "manual",
            session_id,
        )
        return checkpoint_to_json(row)

    async def summary_request(
        self, session_id: str, *, encode_as: str | None = None
    ) -> dict[str, Any]:
        """The exact request a manual compaction would send to the summary model (spec §7.8).
        The session remembers it (what it covers, the checkpoint it was built on): a summary
        posted back without saying what it covers is taken as this request's answer."""
        async with unit_of_work(self._db, read_only=True) as db:
            source = await load_source(db, session_id, self._counters, turn_id=None)
        result = prepared_to_json(
            source.summary_request,
            encode_as=encode_as,
            model_name=source.summary_model.provider.model_name,
            reasoning=source.summary_model.capabilities.reasoning,
        )
        async with unit_of_work(self._db) as db:
            await CompactionRepository(db).record_summary_request(
                session_id, through=source.through, compaction_id=source.base_compaction_id
            )
        # What the summary covers: the caller names it back when posting the summary.
        result["through_message_sequence"] = source.through
        result["summary_model_id"] = source.summary_model.id
        return result

    async def _summarize(
        self,
        session_id: str,
        *,
        kind: Trigger,
        turn_id: str | None = None,
        prepare_id: str | None = None,
        evidence: dict[str, Any] | None = None,
        posted: PostedSummary | None = None,
        provided_model: str | None = None,
        expected_through: int | None = None,
        accept_dropped_user_facts: bool = False,
        allow_larger: bool = False,
    ) -> Compaction:
        async with unit_of_work(self._db, read_only=True) as db:
            # A posted summary is validated there, and decides what the checkpoint covers.
            source = await load_source(
                db, session_id, self._counters, turn_id=turn_id, covered=posted
            )
        note_source(source.before.conversation_tokens)
        if expected_through is not None and expected_through != source.through:
            raise conversation_changed(expected_through, source.through)
        if posted is not None:
            assert posted.text is not None  # validated by load_source's coverage call
            if not accept_dropped_user_facts:
                require_user_facts(source.items, posted.text)
            generated = GeneratedSummary(posted.text, Usage(), attempts=1, elapsed_ms=0)
            model_name = provided_model or "caller"
        else:
            check_summary_fits(source)
            client = self._clients.for_model(
                source.summary_model, session_id=session_id, purpose="summary"
            )
            generated = await generate_summary(client, source.summary_request, self.policy)
            model_name = source.summary_model.id
        if kind != "manual":
            evidence = {**trigger_evidence(source.before), **(evidence or {})}
        row = checkpoint_row(source, generated, self._counters, kind, turn_id, evidence, model_name)
        row.trigger_prepare_id = prepare_id
        refused = refusal_of(
            kind,
            source.before.conversation_tokens,
            row.conversation_tokens_after or 0,
            allow_larger=allow_larger,
        )
        if refused is not None:
            await record_refusal(
                self._db,
                self._events,
                session_id,
                refused,
                generated.usage,
                turn_id=turn_id,
                prepare_id=prepare_id,
            )
            raise refused
        row = await self._store(row, source.base_compaction_id, generated.usage)
        await self._install(row)
        return row

    async def _store(
        self, row: Compaction, base_compaction_id: str | None, usage: Usage | None
    ) -> Compaction:
        started = time.perf_counter()
        async with unit_of_work(self._db) as db:
            stored = await store_checkpoint(
                db, self._events, row, base_compaction_id=base_compaction_id, usage=usage
            )
        stored.persistence_ms = _ms(started)
        return stored

    # ----- rewind ---------------------------------------------------------------------------------

    async def rewind(self, session_id: str, compaction_id: str) -> dict[str, Any]:
        """Reinstall checkpoint ``compaction_id`` as a new ``rewind`` checkpoint (spec §7.7)."""
        row = await self._observed(self._rewind(session_id, compaction_id), "rewind", session_id)
        return checkpoint_to_json(row)

    async def _rewind(self, session_id: str, compaction_id: str) -> Compaction:
        row = await store_rewind(self._db, self._events, self._counters, session_id, compaction_id)
        await self._install(row)
        return row

    # ----- install and rebuild ----------------------------------------------------------------

    async def _install(self, row: Compaction) -> None:
        started = time.perf_counter()
        try:
            await install(self._db, row.session_id, self.install_hooks)
        except Exception as exc:
            log.exception(
                "checkpoint install failed",
                extra={"fields": {"session_id": row.session_id, "compaction": row.compaction_id}},
            )
            await self._flag_reload(row.session_id)
            # Only our own error's words reach the caller; anything else is in the log.
            cause = exc.detail if isinstance(exc, ServiceError) else "an internal error, logged"
            raise reload_required_error(row.session_id, row.compaction_id, cause) from exc
        row.install_ms = _ms(started)
        await self._record_timings(row)

    async def _observed(
        self, work: Awaitable[Compaction], kind: str, session_id: str
    ) -> Compaction:
        if self._observer is None:
            return await work
        return await self._observer.observe(work, kind=kind, session_id=session_id)

    async def _flag_reload(self, session_id: str) -> None:
        try:
            async with unit_of_work(self._db) as db:
                await SessionRepository(db).set_reload_required(session_id, True)
        except Exception:
            log.exception("could not flag the session reload_required")

    async def _record_timings(self, row: Compaction) -> None:
        """Persistence (commit included) and install are only known after the commit."""
        try:
            async with unit_of_work(self._db) as db:
                stored = await CompactionRepository(db).get(row.session_id, row.compaction_id)
                if stored is not None:
                    stored.persistence_ms = row.persistence_ms
                    stored.install_ms = row.install_ms
        except Exception:
            log.warning("could not record compaction timings", exc_info=True)

    async def rebuild(self, session_id: str) -> dict[str, Any]:
        """Rebuild the session from the database and clear ``reload_required`` (idempotent)."""
        async with unit_of_work(self._db, read_only=True) as db:
            await SessionRepository(db).require(session_id)
            await require_idle(db, session_id, "reloaded")
        try:
            active = await install(self._db, session_id, self.install_hooks)
        except ServiceError:
            raise
        except Exception as exc:
            log.exception("session rebuild failed", extra={"fields": {"session_id": session_id}})
            raise Unavailable(
                "reload_failed",
                "the session could not be rebuilt from the database (an internal error, "
                "logged); it still needs a reload, try again later",
            ) from exc
        async with unit_of_work(self._db) as db:
            sessions = SessionRepository(db)
            await sessions.resync_sequences(session_id)
            await sessions.set_reload_required(session_id, False)
        checkpoint = active.checkpoint
        return {
            "session_id": session_id,
            "reload_required": False,
            "compaction_id": checkpoint.compaction_id if checkpoint is not None else None,
        }
