"""Which stored session a caller's history continues (spec §21.1).

An explicit ``X-Ctxsvc-Session-Id`` names the session; otherwise the session of the request's
family (tenant, model, system prompt, tools) with the longest stored end that is a prefix of the
request's messages. A request continues a session when that end is the session's last one
(checked again under the session's lock, so two requests that continue one session at once
are told apart; when the session moved on meanwhile, its ends are looked up again under the
lock, so a request whose previous answer was stored after its response still continues it);
an end before the last one is an edited history or a retry of an earlier request, and forks:
a new session, the stored one left as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from app.storage.models import AgentSession
from app.storage.repositories.proxy_ends import ProxyEndRepository
from app.storage.repositories.sessions import SessionRepository

__all__ = ["Match", "find_match"]


@dataclass(frozen=True, slots=True)
class Match:
    # The session continued (``continues``) or forked from; None: a new session, no origin.
    session_id: str | None
    # How many of the request's messages it already holds.
    length: int
    continues: bool
    # The session's row, when it was loaded under its lock here (``require(for_update=True)``).
    row: AgentSession | None = field(default=None, compare=False)


async def find_match(
    db: AsyncSession,
    chain: Sequence[str],
    tenant_id: str,
    family: str,
    session_id: str | None,
) -> Match:
    ends = ProxyEndRepository(db)
    if session_id is not None:
        hits = await ends.longest(chain, tenant_id=tenant_id, family=None, session_id=session_id)
        if not hits:
            # None of it is stored: the caller sends what is new to the session it names.
            return Match(session_id, 0, True)
        hit = hits[0]
        return Match(session_id, hit.length, hit.length == hit.head)
    hits = await ends.longest(chain, tenant_id=tenant_id, family=family)
    if not hits:
        return Match(None, 0, False)
    exclusive = db.get_bind().dialect.name == "sqlite"
    for hit in hits:
        if hit.length != hit.head:
            continue
        row = await SessionRepository(db).require(hit.session_id, for_update=True)
        if exclusive:
            # An SQLite write transaction is exclusive from its BEGIN: the look-up is current.
            return Match(hit.session_id, hit.length, True, row)
        # Under the lock: another request may have continued it since the look-up, or the
        # answer to the caller's last request was stored meanwhile (``answers``): look again.
        head = (await ends.heads([hit.session_id])).get(hit.session_id)
        if head == hit.length:
            return Match(hit.session_id, hit.length, True, row)
        again = await ends.longest(
            chain, tenant_id=tenant_id, family=None, session_id=hit.session_id
        )
        if again and again[0].length == again[0].head:
            return Match(hit.session_id, again[0].length, True, row)
    return Match(hits[0].session_id, hits[0].length, False)
