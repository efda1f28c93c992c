"""The prefix record of each session's previous prepared request (``app.core.prefix``)."""

from __future__ import annotations

from sqlalchemy import select

from app.storage.base import utc_now
from app.storage.models import SessionRequestPrefix
from app.storage.repositories.base import Repository

__all__ = ["RequestPrefixRepository"]


class RequestPrefixRepository(Repository):
    """One row per session, replaced by every request sent or handed to a caller to send."""

    async def get(self, session_id: str) -> bytes | None:
        stmt = select(SessionRequestPrefix.record).where(
            SessionRequestPrefix.session_id == session_id
        )
        record = (await self.session.execute(stmt)).scalar_one_or_none()
        # Whatever the driver hands back (``memoryview`` from some): plain bytes.
        return None if record is None else bytes(record)

    async def put(self, session_id: str, record: bytes) -> None:
        now = utc_now()
        stmt = self._insert(SessionRequestPrefix).values(
            session_id=session_id, record=record, updated_at=now
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[SessionRequestPrefix.session_id],
            set_={"record": stmt.excluded.record, "updated_at": now},
        )
        await self.session.execute(stmt)
