"""Pins (``app.core.pins``): what the API does with them, what a user message proposes, and the
World State section that puts them in every request.

- ``PinService``: list, create, replace and remove a session's pins; list, accept and dismiss
  the proposals. Each change is one transaction under the session's lock, announced by a
  durable ``pins_changed`` update; a refused change stores nothing.
- ``propose_pins``: called where user messages are stored (appends, a turn's start), in their
  transaction: the constraints recognized in them become open proposals.
- ``pins_section``: the ``session/pins`` section for the World State sampler.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, TypeAlias, TypedDict

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import Conflict, NotFound
from app.core.pins import (
    MAX_OPEN_PROPOSALS,
    PIN_KINDS,
    Pin,
    PinKind,
    check_pin_text,
    check_session_totals,
    pin_bytes,
    proposed_constraints,
    render_pins,
)
from app.core.world_state import PINNED_CONTEXT, RenderedSection
from app.services.events import EventEmitter
from app.storage.database import SessionFactory, unit_of_work
from app.storage.models import AgentSession, PinProposal, SessionPin
from app.storage.repositories.pins import NewProposal, PinRepository
from app.storage.repositories.records import StoredMessage
from app.storage.repositories.sessions import SessionRepository

__all__ = [
    "PinList",
    "PinRecord",
    "PinService",
    "ProposalRecord",
    "ProposalStatus",
    "pins_section",
    "propose_pins",
]

ProposalStatus: TypeAlias = Literal["open", "accepted", "dismissed"]
_STATUSES: tuple[ProposalStatus, ...] = ("open", "accepted", "dismissed")
PinChange: TypeAlias = Literal[
    "created", "replaced", "removed", "proposed", "accepted", "dismissed"
]


@dataclass(frozen=True, slots=True)
class PinRecord:
    pin_id: str
    kind: PinKind
    text: str
    bytes: int
    position: int
    proposal_id: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, row: SessionPin) -> PinRecord:
        return cls(
            pin_id=row.pin_id,
            kind=_kind_of(row.kind),
            text=row.text,
            bytes=pin_bytes(row.text),
            position=row.position,
            proposal_id=row.proposal_id,
            created_at=row.created_at,
            updated_at=row.updated_at,
        )


@dataclass(frozen=True, slots=True)
class PinList:
    pins: list[PinRecord]
    total_bytes: int
    open_proposals: int


@dataclass(frozen=True, slots=True)
class ProposalRecord:
    proposal_id: str
    text: str
    status: ProposalStatus
    message_id: str
    message_sequence: int
    pin_id: str | None
    created_at: datetime
    decided_at: datetime | None

    @classmethod
    def of(cls, row: PinProposal) -> ProposalRecord:
        return cls(
            proposal_id=row.proposal_id,
            text=row.text,
            # The table's CHECK constraint admits only these three.
            status=next((s for s in _STATUSES if s == row.status), "open"),
            message_id=row.message_id,
            message_sequence=row.message_sequence,
            pin_id=row.pin_id,
            created_at=row.created_at,
            decided_at=row.decided_at,
        )


def _kind_of(stored: str) -> PinKind:
    # The table's CHECK constraint admits only these; a fact is the mildest reading otherwise.
    return next((kind for kind in PIN_KINDS if kind == stored), "fact")


class PinsChanged(TypedDict):
    change: PinChange
    pin_id: str | None
    proposal_ids: list[str]


def _changed(
    change: PinChange, *, pin_id: str | None = None, proposal_ids: Sequence[str] = ()
) -> PinsChanged:
    """The payload of a ``pins_changed`` update."""
    return {"change": change, "pin_id": pin_id, "proposal_ids": list(proposal_ids)}


def _pin_not_found(pin_id: str) -> NotFound:
    return NotFound(
        "pin_not_found",
        f"the session has no pin {pin_id!r}; GET …/pins lists them",
        pin_id=pin_id,
    )


def _proposal_not_found(proposal_id: str) -> NotFound:
    return NotFound(
        "pin_proposal_not_found",
        f"the session has no pin proposal {proposal_id!r}; GET …/pins/proposals lists them",
        proposal_id=proposal_id,
    )


def _check_room(pins: Sequence[SessionPin], text: str, *, replacing: str | None = None) -> None:
    """Refuse a pin that would repeat another one or take the session over its limits."""
    others = [p for p in pins if p.pin_id != replacing]
    same = next((p for p in others if p.text == text), None)
    if same is not None:
        raise Conflict(
            "duplicate_pin",
            f"the session already has this text pinned as {same.pin_id!r}; replace that pin "
            "instead",
            pin_id=same.pin_id,
        )
    check_session_totals(len(others) + 1, sum(pin_bytes(p.text) for p in others) + pin_bytes(text))


class PinService:
    def __init__(self, db: SessionFactory, events: EventEmitter) -> None:
        self._db = db
        self._events = events

    async def pins(self, session_id: str) -> PinList:
        async with unit_of_work(self._db, read_only=True) as db:
            await SessionRepository(db).require(session_id)
            pins = PinRepository(db)
            records = [PinRecord.of(row) for row in await pins.pins(session_id)]
            return PinList(
                pins=records,
                total_bytes=sum(r.bytes for r in records),
                open_proposals=await pins.open_proposals(session_id),
            )

    async def get(self, session_id: str, pin_id: str) -> PinRecord:
        async with unit_of_work(self._db, read_only=True) as db:
            await SessionRepository(db).require(session_id)
            row = await PinRepository(db).pin(session_id, pin_id)
            if row is None:
                raise _pin_not_found(pin_id)
            return PinRecord.of(row)

    async def create(self, session_id: str, kind: PinKind, text: str) -> PinRecord:
        check_pin_text(text)
        async with unit_of_work(self._db) as db:
            record = await self._add(db, session_id, kind, text, proposal_id=None)
            await self._emit(db, session_id, _changed("created", pin_id=record.pin_id))
            return record

    async def replace(self, session_id: str, pin_id: str, kind: PinKind, text: str) -> PinRecord:
        check_pin_text(text)
        async with unit_of_work(self._db) as db:
            await SessionRepository(db).lock(session_id)
            pins = PinRepository(db)
            rows = await pins.pins(session_id)
            row = next((r for r in rows if r.pin_id == pin_id), None)
            if row is None:
                raise _pin_not_found(pin_id)
            _check_room(rows, text, replacing=pin_id)
            record = PinRecord.of(await pins.replace(row, kind=kind, text=text))
            await self._emit(db, session_id, _changed("replaced", pin_id=pin_id))
            return record

    async def remove(self, session_id: str, pin_id: str) -> None:
        async with unit_of_work(self._db) as db:
            await SessionRepository(db).lock(session_id)
            if not await PinRepository(db).remove(session_id, pin_id):
                raise _pin_not_found(pin_id)
            await self._emit(db, session_id, _changed("removed", pin_id=pin_id))

    async def proposals(
        self, session_id: str, status: ProposalStatus | None, *, limit: int
    ) -> list[ProposalRecord]:
        async with unit_of_work(self._db, read_only=True) as db:
            await SessionRepository(db).require(session_id)
            rows = await PinRepository(db).proposals(session_id, status, limit=limit)
            return [ProposalRecord.of(row) for row in rows]

    async def accept(self, session_id: str, proposal_id: str) -> PinRecord:
        """Pin an open proposal's text verbatim, as a constraint."""
        async with unit_of_work(self._db) as db:
            proposal = await self._open_proposal(db, session_id, proposal_id)
            record = await self._add(
                db, session_id, "constraint", proposal.text, proposal_id=proposal_id
            )
            await PinRepository(db).decide(proposal, "accepted", pin_id=record.pin_id)
            change = _changed("accepted", pin_id=record.pin_id, proposal_ids=[proposal_id])
            await self._emit(db, session_id, change)
            return record

    async def dismiss(self, session_id: str, proposal_id: str) -> ProposalRecord:
        async with unit_of_work(self._db) as db:
            proposal = await self._open_proposal(db, session_id, proposal_id)
            decided = await PinRepository(db).decide(proposal, "dismissed")
            await self._emit(db, session_id, _changed("dismissed", proposal_ids=[proposal_id]))
            return ProposalRecord.of(decided)

    async def _add(
        self,
        db: AsyncSession,
        session_id: str,
        kind: PinKind,
        text: str,
        *,
        proposal_id: str | None,
    ) -> PinRecord:
        await SessionRepository(db).lock(session_id)
        pins = PinRepository(db)
        _check_room(await pins.pins(session_id), text)
        row = await pins.add(
            session_id,
            pin_id=f"pin-{uuid.uuid4().hex}",
            kind=kind,
            text=text,
            proposal_id=proposal_id,
        )
        return PinRecord.of(row)

    async def _open_proposal(
        self, db: AsyncSession, session_id: str, proposal_id: str
    ) -> PinProposal:
        await SessionRepository(db).lock(session_id)
        proposal = await PinRepository(db).proposal(session_id, proposal_id)
        if proposal is None:
            raise _proposal_not_found(proposal_id)
        if proposal.status != "open":
            raise Conflict(
                "pin_proposal_not_open",
                f"the proposal {proposal_id!r} was already {proposal.status}; only an open "
                "proposal can be accepted or dismissed",
                proposal_status=proposal.status,
                pin_id=proposal.pin_id,
            )
        return proposal

    async def _emit(self, db: AsyncSession, session_id: str, payload: PinsChanged) -> None:
        await self._events.emit(db, session_id, "pins_changed", payload)


def _text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _candidates(messages: Sequence[StoredMessage]) -> list[NewProposal]:
    """The constraints recognized in ``messages``' user requests, each text once."""
    found: dict[str, NewProposal] = {}
    for message in messages:
        # What a message is comes from its stored role and kind, never from its text: only a
        # user's own request is read (not skills, agent messages, World State or tool output).
        if message.role != "user" or message.kind != "normal":
            continue
        text = "\n".join(b["text"] for b in message.content if b["type"] == "text")
        for ordinal, sentence in enumerate(proposed_constraints(text)):
            if sentence not in found:
                found[sentence] = NewProposal(
                    proposal_id=f"proposal-{uuid.uuid4().hex}",
                    text=sentence,
                    text_key=_text_key(sentence),
                    message_id=message.message_id,
                    message_sequence=message.sequence,
                    ordinal=ordinal,
                )
    return list(found.values())


async def propose_pins(
    db: AsyncSession,
    session_id: str,
    messages: Sequence[StoredMessage],
    events: EventEmitter,
) -> None:
    """Record the constraints recognized in ``messages`` as open proposals, in the caller's
    transaction (which holds the session's lock: it has just appended them).

    A text the session already has a proposal of (open, accepted or dismissed) or a pin of is
    not proposed again; beyond ``MAX_OPEN_PROPOSALS`` open ones, new ones are not recorded
    until the caller answers some. Costs no query when nothing is recognized.
    """
    candidates = _candidates(messages)
    if not candidates:
        return
    pins = PinRepository(db)
    known = await pins.known_text_keys(session_id, [c.text_key for c in candidates])
    pinned = {row.text for row in await pins.pins(session_id)}
    fresh = [c for c in candidates if c.text_key not in known and c.text not in pinned]
    room = MAX_OPEN_PROPOSALS - await pins.open_proposals(session_id)
    fresh = fresh[: max(room, 0)]
    if not fresh:
        return
    await pins.add_proposals(session_id, fresh)
    ids = [c.proposal_id for c in fresh]
    await events.emit(db, session_id, "pins_changed", _changed("proposed", proposal_ids=ids))


async def pins_section(
    db: AsyncSession, session: AgentSession, current_row: bool
) -> RenderedSection:
    """The ``session/pins`` section as it is now. ``current_row``: ``session`` is this
    transaction's locked row (``SessionRepository.is_current``), so its ``pin_count`` is the
    stored one and a session without pins reads nothing."""
    if current_row and session.pin_count == 0:
        return RenderedSection(PINNED_CONTEXT, None)
    rows = await PinRepository(db).pins(session.id)
    return RenderedSection(
        PINNED_CONTEXT, render_pins([Pin(_kind_of(row.kind), row.text) for row in rows])
    )
