"""Where proxied histories end (``proxy_ends``, spec §21.1): found by digest, in bounded batches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, delete, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import aliased

from app.storage.deferred import write
from app.storage.models import AgentSession, ProxyEnd
from app.storage.repositories.base import Repository

__all__ = ["LOOKUP_BATCH", "EndHit", "ProxyEndRepository"]

# Chain digests asked for per query: a request of n messages costs at most ⌈n / 64⌉ indexed
# queries, and one when it continues a session (its longest stored end is among the last 64).
LOOKUP_BATCH = 64

# Prebuilt, with expanding parameters: building the query with its 64 digests as literals cost
# more than running it (each value coerced anew, the compiled form looked up by all of them).
# Each end found comes with its session's last end (an index lookup per row, usually one row):
# no second query for the heads.
_LATER = aliased(ProxyEnd)
_HEAD = (
    select(func.max(_LATER.length))
    .where(_LATER.session_id == ProxyEnd.session_id)
    .correlate(ProxyEnd)
    .scalar_subquery()
)
_ENDS = select(ProxyEnd.session_id, ProxyEnd.length, ProxyEnd.chain_digest, _HEAD).where(
    ProxyEnd.chain_digest.in_(bindparam("k_digests", expanding=True)),
    ProxyEnd.tenant_id == bindparam("k_tenant"),
)
_ENDS_OF_FAMILY = _ENDS.where(ProxyEnd.family_digest == bindparam("k_family"))
_ENDS_OF_SESSION = _ENDS.where(ProxyEnd.session_id == bindparam("k_session"))


def _add(insert: Any) -> Any:
    # Built once per dialect (each call writes one or two ends): no statement to build per call.
    columns = ("session_id", "length", "tenant_id", "family_digest", "chain_digest")
    stmt = insert(ProxyEnd).values({name: bindparam(name) for name in columns})
    return stmt.on_conflict_do_nothing(index_elements=["session_id", "length"])


_ADD = {"postgresql": _add(postgresql.insert), "sqlite": _add(sqlite.insert)}
_HEADS = (
    select(ProxyEnd.session_id, func.max(ProxyEnd.length))
    .where(ProxyEnd.session_id.in_(bindparam("k_sessions", expanding=True)))
    .group_by(ProxyEnd.session_id)
)


@dataclass(frozen=True, slots=True)
class EndHit:
    session_id: str
    # The caller's messages the end covers.
    length: int
    # The session's last stored end: equal to ``length`` when the request continues it.
    head: int


class ProxyEndRepository(Repository):
    async def longest(
        self,
        chain: Sequence[str],
        *,
        tenant_id: str,
        family: str | None,
        session_id: str | None = None,
    ) -> list[EndHit]:
        """The stored ends with the longest prefix of ``chain`` (``chain[i]`` covers ``i + 1``
        messages), newest session first; within a family of one tenant, or of one session.
        Asked from the end backwards ``LOOKUP_BATCH`` digests at a time; [] when none is."""
        stop = len(chain)
        while stop > 0:
            start = max(0, stop - LOOKUP_BATCH)
            wanted = {chain[i]: i + 1 for i in range(start, stop)}
            params: dict[str, object] = {"k_digests": list(wanted), "k_tenant": tenant_id}
            query = _ENDS
            if family is not None and session_id is not None:
                query = _ENDS_OF_FAMILY.where(ProxyEnd.session_id == bindparam("k_session"))
            elif family is not None:
                query = _ENDS_OF_FAMILY
            elif session_id is not None:
                query = _ENDS_OF_SESSION
            if family is not None:
                params["k_family"] = family
            if session_id is not None:
                params["k_session"] = session_id
            found = (await self.session.execute(query, params)).all()
            rows = [(s, n) for s, n, d, _ in found if wanted[d] == n]
            if rows:
                best = max(n for _, n in rows)
                sessions = [s for s, n in rows if n == best]
                heads = {s: int(h) for s, _, _, h in found if h is not None}
                if len(sessions) > 1:  # one session (the usual case) needs no order
                    created = await self._created(sessions)
                    sessions.sort(key=lambda s: created.get(s, ""), reverse=True)
                return [EndHit(s, best, heads.get(s, best)) for s in sessions]
            stop = start
        return []

    async def heads(self, session_ids: Sequence[str]) -> dict[str, int]:
        """Each session's last stored end (sessions without one are absent)."""
        if not session_ids:
            return {}
        rows = await self.session.execute(_HEADS, {"k_sessions": list(session_ids)})
        return {s: int(n) for s, n in rows.all()}

    async def _created(self, session_ids: Sequence[str]) -> dict[str, str]:
        rows = await self.session.execute(
            select(AgentSession.id, AgentSession.created_at).where(
                AgentSession.id.in_(list(session_ids))
            )
        )
        return {s: c.isoformat() for s, c in rows.all()}

    async def add(
        self, session_id: str, *, tenant_id: str, family: str, ends: Sequence[tuple[int, str]]
    ) -> None:
        """Record the ends ``(length, chain digest)``; one already stored is left as it is.
        Queued when the transaction defers its writes (``app.storage.deferred``)."""
        rows = [
            {
                "session_id": session_id,
                "length": length,
                "tenant_id": tenant_id,
                "family_digest": family,
                "chain_digest": digest,
            }
            for length, digest in ends
        ]
        if rows:
            await write(self.session, _ADD[self.dialect_name], rows if len(rows) > 1 else rows[0])

    async def reset(self, session_id: str) -> None:
        """Forget a session's ends: its caller history starts again (spec §21.1)."""
        await self.session.execute(delete(ProxyEnd).where(ProxyEnd.session_id == session_id))
