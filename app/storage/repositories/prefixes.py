"""The prefix record of each session's previous prepared request
(``app.core.caching.prefix_record``)."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Table, bindparam, select
from sqlalchemy.dialects import postgresql, sqlite

from app.storage.base import utc_now
from app.storage.deferred import write
from app.storage.models import SessionRequestPrefix
from app.storage.repositories.base import Repository

__all__ = ["RequestPrefixRepository"]

_prefixes = cast(Table, SessionRequestPrefix.__table__)
_GET = select(_prefixes.c.record).where(_prefixes.c.session_id == bindparam("k_session_id"))


def _upsert(insert: Any) -> Any:
    # Built once per dialect: a turn writes the record with every model call, and building the
    # statement (and its cache key) cost more than running it.
    stmt = insert(_prefixes).values(
        session_id=bindparam("k_session_id"),
        record=bindparam("v_record"),
        updated_at=bindparam("v_updated_at"),
    )
    return stmt.on_conflict_do_update(
        index_elements=[_prefixes.c.session_id],
        set_={"record": stmt.excluded.record, "updated_at": stmt.excluded.updated_at},
    )


_UPSERT = {"postgresql": _upsert(postgresql.insert), "sqlite": _upsert(sqlite.insert)}


class RequestPrefixRepository(Repository):
    """One row per session, replaced by every request sent or handed to a caller to send."""

    async def get(self, session_id: str) -> bytes | None:
        record = (
            await self.session.execute(_GET, {"k_session_id": session_id})
        ).scalar_one_or_none()
        # Whatever the driver hands back (``memoryview`` from some): plain bytes.
        return None if record is None else bytes(record)

    async def put(self, session_id: str, record: bytes) -> None:
        params = {"k_session_id": session_id, "v_record": record, "v_updated_at": utc_now()}
        await write(self.session, _UPSERT[self.dialect_name], params)
