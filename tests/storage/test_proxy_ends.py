"""Finding the session a proxied history continues (spec §21.1), on SQLite and PostgreSQL:
digests, the look-up batches' boundaries, and what makes two histories different sessions."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from app.core.content import Block
from app.core.pipeline.prepared_call import ToolDefinition
from app.services.proxy.digests import chain_digests, family_digest, message_key
from app.services.proxy.matching import Match, find_match
from app.storage.database import SessionFactory, unit_of_work
from app.storage.repositories.proxy_ends import LOOKUP_BATCH, ProxyEndRepository
from app.storage.repositories.sessions import SessionRepository
from tests.storage.conftest import MakeSession

pytestmark = pytest.mark.anyio

TOOL: ToolDefinition = {
    "name": "read",
    "description": "Read a file.",
    "input_schema": {"type": "object"},
}
RENAMED: ToolDefinition = {**TOOL, "description": "Reads."}


def user(text: str) -> bytes:
    return message_key("user", [{"type": "text", "text": text}])


def history(n: int) -> list[bytes]:
    return [user(f"message {i}") for i in range(n)]


async def record(
    factory: SessionFactory, sid: str, tenant: str, family: str, ends: list[tuple[int, str]]
) -> None:
    async with unit_of_work(factory) as db:
        await ProxyEndRepository(db).add(sid, tenant_id=tenant, family=family, ends=ends)


async def match(
    factory: SessionFactory, chain: list[str], tenant: str, family: str, sid: str | None = None
) -> Match:
    async with unit_of_work(factory) as db:
        return await find_match(db, chain, tenant, family, sid)


def test_a_family_is_the_tenant_model_system_and_tools() -> None:
    base = family_digest("t", "m", "sys", [TOOL])
    assert family_digest("t", "m", "sys", [TOOL]) == base
    others = [
        family_digest("u", "m", "sys", [TOOL]),
        family_digest("t", "n", "sys", [TOOL]),
        family_digest("t", "m", "sys.", [TOOL]),
        family_digest("t", "m", None, [TOOL]),
        family_digest("t", "m", "sys", []),
        family_digest("t", "m", "sys", [RENAMED]),
    ]
    assert len({base, *others}) == 7


def test_a_message_key_is_what_a_client_echoes_back() -> None:
    call: list[Block] = [
        {"type": "text", "text": "Reading."},
        {"type": "tool_call", "id": "c1", "name": "read", "input": '{"path": "a.py", "n": 1}'},
    ]
    # An SDK that re-serializes the arguments (LangChain) sends the same call.
    echoed: list[Block] = [
        {"type": "text", "text": "Reading."},
        {"type": "tool_call", "id": "c1", "name": "read", "input": '{"n":1,"path":"a.py"}'},
    ]
    assert message_key("assistant", call) == message_key("assistant", echoed)
    # Thinking never comes back through Chat Completions: it is not part of the key.
    thought: list[Block] = [{"type": "thinking", "thinking": "hmm"}, *call]
    assert message_key("assistant", thought) == message_key("assistant", call)
    # A different argument, id or text is a different message.
    other_call: Block = {
        "type": "tool_call",
        "id": "c1",
        "name": "read",
        "input": '{"path": "b.py", "n": 1}',
    }
    changed: list[Block] = [call[0], other_call]
    assert message_key("assistant", changed) != message_key("assistant", call)
    assert message_key("user", call) != message_key("assistant", call)


def test_a_chain_digest_names_every_message_before_it() -> None:
    family = family_digest("t", "m", None, [])
    chain = chain_digests(family, history(3))
    assert len(set(chain)) == 3
    assert chain_digests(family, history(2)) == chain[:2]
    swapped = chain_digests(family, [history(3)[1], history(3)[0], history(3)[2]])
    assert swapped[2] != chain[2]
    assert chain_digests(family_digest("t", "n", None, []), history(3))[0] != chain[0]


@pytest.mark.parametrize(
    "length", [1, LOOKUP_BATCH - 1, LOOKUP_BATCH, LOOKUP_BATCH + 1, 2 * LOOKUP_BATCH + 1]
)
async def test_the_longest_stored_end_is_found_across_batch_boundaries(
    factory: SessionFactory, make_session: MakeSession, length: int
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    family = family_digest(tenant, "m", None, [])
    chain = chain_digests(family, history(2 * LOOKUP_BATCH + 2))
    sid = await make_session()
    await record(factory, sid, tenant, family, [(length, chain[length - 1])])
    found = await match(factory, chain, tenant, family)
    assert found == Match(sid, length, True)
    # A shorter stored end of another session is not the longest.
    other = await make_session()
    if length > 1:
        await record(factory, other, tenant, family, [(1, chain[0])])
        assert await match(factory, chain, tenant, family) == Match(sid, length, True)


async def test_an_end_before_the_last_forks_and_other_families_never_match(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    family = family_digest(tenant, "m", "sys", [])
    chain = chain_digests(family, history(4))
    sid = await make_session()
    await record(factory, sid, tenant, family, [(2, chain[1]), (4, chain[3])])
    assert await match(factory, chain, tenant, family) == Match(sid, 4, True)
    # The first two messages again (a retry of the first request): a fork of ``sid``.
    assert await match(factory, chain[:2], tenant, family) == Match(sid, 2, False)
    # An edit of message 3: the longest stored prefix is 2, before the last end: a fork.
    edited = chain_digests(family, [*history(2), user("edited"), *history(4)[3:]])
    assert await match(factory, edited, tenant, family) == Match(sid, 2, False)
    # The same messages under another system prompt, model or tenant: nothing to continue.
    for other in (
        family_digest(tenant, "m", "other", []),
        family_digest(tenant, "n", "sys", []),
    ):
        assert await match(factory, chain_digests(other, history(4)), tenant, other) == Match(
            None, 0, False
        )
    stranger = f"t-{uuid.uuid4().hex[:8]}"
    assert await match(factory, chain, stranger, family) == Match(None, 0, False)


async def test_a_named_session_takes_what_it_does_not_hold_as_new(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    family = family_digest(tenant, "m", None, [])
    chain = chain_digests(family, history(3))
    sid = await make_session()
    assert await match(factory, chain, tenant, family, sid) == Match(sid, 0, True)
    await record(factory, sid, tenant, family, [(3, chain[2])])
    assert await match(factory, chain, tenant, family, sid) == Match(sid, 3, True)
    async with unit_of_work(factory) as db:
        await ProxyEndRepository(db).reset(sid)
    assert await match(factory, chain, tenant, family, sid) == Match(sid, 0, True)


# PostgreSQL only: SQLite's write transactions are exclusive from their BEGIN, so nothing can
# commit between the look-up and the lock there.
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_an_end_stored_between_the_look_up_and_the_lock_is_looked_up_again(
    factory: SessionFactory, make_session: MakeSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer to the caller's last request, written after its response (another worker's
    task), commits while this request matches: under the lock it looks again and continues,
    where it would otherwise fork."""
    tenant = f"t-{uuid.uuid4().hex[:8]}"
    family = family_digest(tenant, "m", None, [])
    chain = chain_digests(family, history(4))
    sid = await make_session()
    await record(factory, sid, tenant, family, [(2, chain[1])])
    require = SessionRepository.require

    async def answer_meanwhile(self: SessionRepository, *args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(SessionRepository, "require", require)
        await record(factory, sid, tenant, family, [(3, chain[2])])
        return await require(self, *args, **kwargs)

    monkeypatch.setattr(SessionRepository, "require", answer_meanwhile)
    assert await match(factory, chain, tenant, family) == Match(sid, 3, True)
