"""The proxy use case (spec §21): a provider-shaped request continues a stored session.

For each call: find the session the caller's history continues (``matching``), append only
what is new, prepare the session's next request as a session prepare does (prune, project,
pairing, budget, World State, compaction at the model's line, cache breakpoints:
``SessionPrepareService.prepare_call``), refuse it when it still does not fit, send it to the
model the request names, and store the answer with the new end of the history.

Two transactions per call: what is new, its end and the prepare's first step before the
provider is called; the answer, with the usage the provider reported and a calibration sample
(as a turn's model call records them), after the caller has it (``answers``: docs/decisions.md,
"The drop-in endpoints store the answer after the response").
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Hashable
from dataclasses import dataclass
from typing import Any

from app.core.caching.breakpoints import plan_for
from app.core.content import Block
from app.core.errors import Conflict, TooLarge
from app.observability import Observability
from app.providers.base import ModelClient, ModelResponse, Usage
from app.providers.encoding.sampling import sampling_fields
from app.services.calibration import record_calibration
from app.services.messages import MessageService
from app.services.model_clients import ModelClients
from app.services.model_types import ModelEntry
from app.services.models import resolve_model
from app.services.proxy.answers import PendingAnswers
from app.services.proxy.contract import (
    AnswerEvent,
    Completed,
    ProxyOutcome,
    ProxyRequest,
    ReasoningDelta,
    TextDelta,
)
from app.services.proxy.digests import ChainCache, chain_digests, family_digest, message_key
from app.services.proxy.matching import find_match
from app.services.proxy.new_session import DEFAULT_SYSTEM_PROMPT, session_spec
from app.services.session_prepare import (
    NEW_SESSION,
    FirstPrepare,
    PreparedSessionCall,
    Preread,
    SessionPrepareService,
)
from app.services.sessions import SessionService
from app.services.tenancy import KeyService
from app.services.turns.answers import bounded_answer
from app.services.turns.usage import usage_columns
from app.settings import Settings
from app.storage.database import SessionFactory, unit_of_work
from app.storage.deferred import defer
from app.storage.models import AgentSession
from app.storage.repositories.proxy_ends import ProxyEndRepository
from app.storage.repositories.sessions import SessionRepository

__all__ = ["DEFAULT_SYSTEM_PROMPT", "ProxyCall", "ProxyService"]


@dataclass(frozen=True, slots=True)
class _Stored:
    session_id: str
    family: str
    tenant_id: str
    # The caller's messages the stored history now covers, and the digest of that end.
    length: int
    chain_end: str
    forked_from: str | None
    # The session's model, resolved in the same transaction (prepare needs it again).
    model: ModelEntry
    # What the request's conversation is waited for by (``answers``).
    conversation_keys: list[Hashable]


class ProxyCall:
    """One forwarded request: its outcome (known before the model is called, for the response
    headers) and the answer, whole (``complete``) or as events (``events``)."""

    def __init__(
        self,
        service: ProxyService,
        stored: _Stored,
        prepared: PreparedSessionCall,
        client: ModelClient,
        request: ProxyRequest,
    ) -> None:
        self._service = service
        self._stored = stored
        self._prepared = prepared
        self._client = client
        self._request = dict(prepared.prepared.request)
        max_output_tokens = request.max_output_tokens
        if max_output_tokens is not None:
            # The caller may ask for less than the model's reserve, never more.
            self._request["max_output_tokens"] = min(
                self._request["max_output_tokens"], max_output_tokens
            )
        tools = bool(self._request.get("tools"))
        extra = sampling_fields(request.sampling, prepared.model.provider.kind, has_tools=tools)
        if extra:  # appended by the wire encoder; a turn's request never has one
            self._request["extra"] = extra
        self.outcome = ProxyOutcome(
            stored.session_id, prepared.prepared.budget, prepared.compacted, stored.forked_from
        )

    async def complete(self) -> ModelResponse:
        response = await self._send(None)
        return self._service.store_answer(self._stored, self._prepared, response)

    async def events(self) -> AsyncIterator[AnswerEvent]:
        """Deltas as they arrive, then ``Completed`` with the answer as it is stored (the write
        follows it: ``store_answer``); a failure of the call is raised from here (after the
        deltas already sent)."""
        queue: asyncio.Queue[AnswerEvent | None] = asyncio.Queue()

        class _Sink:
            async def on_text_delta(self, text: str) -> None:
                queue.put_nowait(TextDelta(text))

            async def on_reasoning_delta(self, text: str) -> None:
                queue.put_nowait(ReasoningDelta(text))

            async def on_draft_cleared(self) -> None:
                # A retried attempt starts over; what the caller has seen cannot be taken
                # back in these protocols, so nothing is sent (docs: spec §21.3).
                return None

        async def run() -> ModelResponse:
            try:
                return await self._send(_Sink())
            finally:
                queue.put_nowait(None)

        task = asyncio.ensure_future(run())
        try:
            while (event := await queue.get()) is not None:
                yield event
            response = await task
        finally:
            if not task.done():  # the caller went away: the provider request is closed
                task.cancel()
        yield Completed(self._service.store_answer(self._stored, self._prepared, response))

    async def _send(self, sink: Any) -> ModelResponse:
        prepared = self._prepared.prepared
        caching = plan_for(
            prepared,
            prompt_caching=self._prepared.model.capabilities.prompt_caching,
            seed=self._stored.session_id,
            stable_messages=prepared.stable_messages,
        )
        return await self._client.complete(
            self._request, sink=sink, caching=caching, conversation=prepared.items
        )


class ProxyService:
    def __init__(
        self,
        db: SessionFactory,
        settings: Settings,
        sessions: SessionService,
        messages: MessageService,
        session_prepare: SessionPrepareService,
        model_clients: ModelClients,
        tenancy: KeyService,
        observability: Observability | None = None,
    ) -> None:
        self._db = db
        self._settings = settings
        self._sessions = sessions
        self._messages = messages
        self._prepare = session_prepare
        self._clients = model_clients
        self._tenancy = tenancy
        self._observability = observability
        self._chains = ChainCache()
        self._answers = PendingAnswers()

    async def begin(
        self,
        request: ProxyRequest,
        *,
        tenant_id: str,
        session_id: str | None = None,
        caller_key: str | None = None,
    ) -> ProxyCall:
        """Store what is new and prepare the call; nothing is sent yet. Raises a
        ``ServiceError`` before the provider is called (unknown model or session, a history
        the store refuses, a request that does not fit)."""
        if caller_key is not None and not self._settings.proxy_caller_keys:
            raise Conflict(
                "caller_keys_disabled",
                "this service sends the registry's provider keys; it does not take a caller's "
                "own key (X-Ctxsvc-Provider-Key) unless CTXSVC_PROXY_CALLER_KEYS is true",
            )
        if session_id is not None:
            await self._tenancy.check_owner(tenant_id, session_id)
        # The answers of this conversation's earlier calls still being written (``answers``).
        await self._answers.wait(_conversation_keys(request, tenant_id, session_id))
        stored, first = await self._store_request(request, tenant_id, session_id)
        if first is None:  # World State reads files: the prepare's own transactions
            prepared = await self._prepare.prepare_call(stored.session_id, stored.model)
        else:
            prepared = await self._prepare.finish(stored.session_id, stored.model, first)
        budget = prepared.prepared.budget
        if budget.estimated_input_tokens > budget.effective_input_tokens:
            raise TooLarge(
                "context_budget_exceeded",
                f"the request needs {budget.estimated_input_tokens} input tokens but model "
                f"{prepared.model.id!r} accepts {budget.effective_input_tokens}, even after "
                "pruning and compaction; it was not sent. Shorten the history or use a model "
                "with a larger window",
                session_id=stored.session_id,
            )
        # ``proxy``: the calls of the compatible endpoints are told apart in the metrics.
        client = self._clients.for_model(
            prepared.model, session_id=stored.session_id, purpose="proxy", api_key=caller_key
        )
        return ProxyCall(self, stored, prepared, client, request)

    async def _store_request(
        self, request: ProxyRequest, tenant_id: str, session_id: str | None
    ) -> tuple[_Stored, FirstPrepare | None]:
        """Store what is new and the history's end, and prepare the call (its first step) in
        the same transaction: one commit before the provider is called."""
        async with unit_of_work(self._db) as db:
            # Its writes go out together, before its next read or at its commit
            # (``app.storage.deferred``), as a turn step's do.
            await defer(db)
            sessions = SessionRepository(db)
            session: AgentSession | None = None
            if session_id is not None:
                # A named session's own model is called (spec §21.1), under its lock.
                session = await sessions.require(session_id, for_update=True)
                model = await resolve_model(db, session.model_id, session.tenant_id)
            else:
                model = await resolve_model(db, request.model, tenant_id)
            model_id = model.id
            family = family_digest(tenant_id, model_id, request.system, request.tools)
            chain = self._chains.chain(family, request.messages)
            match = await find_match(db, chain, tenant_id, family, session_id)
            ends = ProxyEndRepository(db)
            forked_from = None
            if match.continues:
                target = match.session_id
                assert target is not None
                new = request.messages[match.length :]
                if session_id is not None and match.length == 0:
                    # The caller sends only what is new to the session it names: the stored
                    # history's chain starts again from this request's messages.
                    await ends.reset(target)
            else:
                forked_from = match.session_id
                made = await self._new_session(db, request, tenant_id, model_id, forked_from)
                # Made here: locked and current already (no read of it under its lock).
                sessions.adopt(made)
                target = made.id
                new = request.messages
            # The row as this transaction holds it (locked and current), else read under lock
            # below; its counters are kept on it and written in one UPDATE at the commit.
            row = match.row if match.continues and session_id is None else session
            if not match.continues:
                row = made
            preread: Preread | None = None
            if row is not None and row.id == target and sessions.is_current(row):
                sessions.defer_counters(row)
            if not match.continues:
                preread = NEW_SESSION
            elif row is not None and row.id == target and sessions.is_current(row):
                # The prepare's reads before the writes: these go out together at the commit.
                preread = await self._prepare.preread(db, row)
            batch = [(m.role, "normal", list(m.content)) for m in new]
            if batch:
                await self._messages.append_in(db, target, batch, model=model)
            if chain:
                await ends.add(
                    target, tenant_id=tenant_id, family=family, ends=[(len(chain), chain[-1])]
                )
            end = chain[-1] if chain else family
            keys = _conversation_keys(request, tenant_id, session_id)
            stored = _Stored(target, family, tenant_id, len(chain), end, forked_from, model, keys)
            if row is None or row.id != target or not sessions.is_current(row):
                row = await sessions.require(target, for_update=True)
            first = await self._prepare.first_in(db, row, model, preread)
            return stored, first

    async def _new_session(
        self,
        db: Any,
        request: ProxyRequest,
        tenant_id: str,
        model_id: str,
        forked_from: str | None,
    ) -> AgentSession:
        checked = session_spec(request, model_id, self._settings.proxy_summary_model or None)
        row = await self._sessions.create_in(
            db,
            checked,
            tenant_id,
            origin=f"proxy:{request.protocol}",
            forked_from=forked_from,
        )
        return row

    def store_answer(
        self, stored: _Stored, prepared: PreparedSessionCall, response: ModelResponse
    ) -> ModelResponse:
        """The model's answer within the limits of one stored message, as it is stored; the
        write (the answer with the end of the history it closes, the call's usage and a
        calibration sample) runs after the caller has it (``answers``)."""
        bounded, _ = bounded_answer(
            response, prepared.model.capabilities, turn_id=f"proxy-{uuid.uuid4().hex[:8]}"
        )
        content = bounded.assistant_content()
        keys = [("session", stored.session_id), *stored.conversation_keys]
        self._answers.start(
            keys, lambda: self._write_answer(stored, prepared, content, response.usage)
        )
        return bounded

    async def _write_answer(
        self,
        stored: _Stored,
        prepared: PreparedSessionCall,
        content: list[Block],
        usage: Usage,
    ) -> None:
        async with unit_of_work(self._db) as db:
            await defer(db)  # its writes go out together, at its commit
            sessions = SessionRepository(db)
            row = await sessions.require(stored.session_id, for_update=True)
            sessions.defer_counters(row)
            # The call counts as a turn's model call does (``TurnWrites.store_response``),
            # whether its answer is stored here or not: the provider did the work.
            sessions.add_usage(row, usage_columns(usage))
            if content:
                await self._append_answer(db, stored, prepared, content)
                # The next call of the conversation then reads nothing back of this answer.
                await self._prepare.extend_in(db, row, prepared.prepared.counter)
            # Last: its savepoint ends what this transaction knows of the row.
            await self._calibrate(db, prepared, usage)

    async def _append_answer(
        self, db: Any, stored: _Stored, prepared: PreparedSessionCall, content: list[Block]
    ) -> None:
        ends = ProxyEndRepository(db)
        head = (await ends.heads([stored.session_id])).get(stored.session_id, 0)
        if head != stored.length:
            # A later request continued the session first, this answer among its history.
            return
        await self._messages.append_in(
            db, stored.session_id, [("assistant", "normal", content)], model=prepared.model
        )
        (end,) = chain_digests(stored.chain_end, [message_key("assistant", content)])
        await ends.add(
            stored.session_id,
            tenant_id=stored.tenant_id,
            family=stored.family,
            ends=[(stored.length + 1, end)],
        )

    async def _calibrate(self, db: Any, prepared: PreparedSessionCall, usage: Usage) -> None:
        """A calibration sample of the call (best effort), as a turn's model call records one:
        the provider's whole input against the estimate of the request sent."""
        model = prepared.model
        sample = await record_calibration(
            db,
            model_id=model.id,
            provider_kind=model.provider.kind,
            counter=prepared.prepared.counter,
            estimated_input_tokens=prepared.prepared.budget.estimated_input_tokens,
            reported_input_tokens=usage.input_tokens,
        )
        if sample is not None and self._observability is not None:
            self._observability.calibration_sample(model.id, *sample)

    async def settled(self, session_id: str) -> None:
        """Until the answers this process is writing into the session are stored (a reader of
        its transcript, a writer of its messages; another worker's are not waited for)."""
        await self._answers.wait([("session", session_id)])

    async def aclose(self) -> None:
        """Let the answers still being written finish (before the database closes)."""
        await self._answers.drain()


def _conversation_keys(
    request: ProxyRequest, tenant_id: str, session_id: str | None
) -> list[Hashable]:
    """What a request says of its conversation before anything is read: the session it names,
    and its tenant, model and system prompt (a coarser family than the digest's, which needs
    the model resolved and the tools)."""
    keys: list[Hashable] = [("family", tenant_id, request.model, request.system)]
    if session_id is not None:
        keys.append(("session", session_id))
    return keys
