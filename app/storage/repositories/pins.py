"""A session's pins and pin proposals (``app.core.pins``).

Every change of ``session_pins`` sets the session's ``pin_count`` in the same transaction (the
World State sampler reads no pins while it is 0), so anything else that writes the table must
keep it too. Writers take the session's lock first (the service does), so positions and counts
are those of one writer at a time, on every replica.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select

from app.storage.base import utc_now
from app.storage.models import PinProposal, SessionPin
from app.storage.repositories.base import Repository
from app.storage.repositories.sessions import SessionRepository

__all__ = ["NewProposal", "PinRepository"]


@dataclass(frozen=True, slots=True)
class NewProposal:
    proposal_id: str
    text: str
    text_key: str
    message_id: str
    message_sequence: int
    ordinal: int


class PinRepository(Repository):
    async def pins(self, session_id: str) -> Sequence[SessionPin]:
        """The session's pins in their order (``position``)."""
        stmt = (
            select(SessionPin)
            .where(SessionPin.session_id == session_id)
            .order_by(SessionPin.position)
        )
        return (await self.session.execute(stmt)).scalars().all()

    async def pin(self, session_id: str, pin_id: str) -> SessionPin | None:
        return await self.session.get(SessionPin, (session_id, pin_id))

    async def add(
        self, session_id: str, *, pin_id: str, kind: str, text: str, proposal_id: str | None
    ) -> SessionPin:
        """A new pin after the session's others; ``pin_count`` follows."""
        position = select(func.coalesce(func.max(SessionPin.position), 0) + 1).where(
            SessionPin.session_id == session_id
        )
        now = utc_now()
        row = SessionPin(
            session_id=session_id,
            pin_id=pin_id,
            position=(await self.session.execute(position)).scalar_one(),
            kind=kind,
            text=text,
            proposal_id=proposal_id,
            created_at=now,
            updated_at=now,
        )
        self.session.add(row)
        await self.session.flush()
        await self._count(session_id)
        return row

    async def replace(self, row: SessionPin, *, kind: str, text: str) -> SessionPin:
        """The same pin (id, position) with a new kind and text."""
        row.kind, row.text, row.updated_at = kind, text, utc_now()
        await self.session.flush()
        return row

    async def remove(self, session_id: str, pin_id: str) -> bool:
        stmt = (
            delete(SessionPin)
            .where(SessionPin.session_id == session_id, SessionPin.pin_id == pin_id)
            .returning(SessionPin.pin_id)
        )
        if (await self.session.execute(stmt)).first() is None:
            return False
        await self._count(session_id)
        return True

    async def _count(self, session_id: str) -> None:
        count = select(func.count()).where(SessionPin.session_id == session_id)
        value = int((await self.session.execute(count)).scalar_one())
        await SessionRepository(self.session).set_pin_count(session_id, value)

    # ----- proposals ----------------------------------------------------------------------------

    async def proposals(
        self, session_id: str, status: str | None, *, limit: int
    ) -> Sequence[PinProposal]:
        """Newest first (the message they were found in, then the order found); ``status``
        ``None``: all."""
        stmt = select(PinProposal).where(PinProposal.session_id == session_id)
        if status is not None:
            stmt = stmt.where(PinProposal.status == status)
        stmt = stmt.order_by(PinProposal.message_sequence.desc(), PinProposal.ordinal).limit(limit)
        return (await self.session.execute(stmt)).scalars().all()

    async def proposal(self, session_id: str, proposal_id: str) -> PinProposal | None:
        return await self.session.get(PinProposal, (session_id, proposal_id))

    async def open_proposals(self, session_id: str) -> int:
        stmt = select(func.count()).where(
            PinProposal.session_id == session_id, PinProposal.status == "open"
        )
        return int((await self.session.execute(stmt)).scalar_one())

    async def known_text_keys(self, session_id: str, keys: Sequence[str]) -> set[str]:
        """Which of ``keys`` some proposal of the session already has (in any status)."""
        stmt = select(PinProposal.text_key).where(
            PinProposal.session_id == session_id, PinProposal.text_key.in_(keys)
        )
        return set((await self.session.execute(stmt)).scalars().all())

    async def add_proposals(self, session_id: str, proposals: Sequence[NewProposal]) -> None:
        """Store ``proposals`` (texts the session has no proposal of: ``known_text_keys``)."""
        now = utc_now()
        self.session.add_all(
            PinProposal(
                session_id=session_id,
                proposal_id=p.proposal_id,
                text=p.text,
                text_key=p.text_key,
                message_id=p.message_id,
                message_sequence=p.message_sequence,
                ordinal=p.ordinal,
                status="open",
                created_at=now,
            )
            for p in proposals
        )
        await self.session.flush()

    async def decide(
        self,
        row: PinProposal,
        status: str,
        *,
        pin_id: str | None = None,
        at: datetime | None = None,
    ) -> PinProposal:
        row.status, row.pin_id, row.decided_at = status, pin_id, at or utc_now()
        await self.session.flush()
        return row
