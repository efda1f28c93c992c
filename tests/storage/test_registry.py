from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from app.core.tenancy import SHARED_TENANT
from app.storage.database import SessionFactory, unit_of_work
from app.storage.models import RegisteredModel
from app.storage.repositories import CalibrationRepository, ModelRepository, SessionRepository
from tests.storage.conftest import MakeSession, new_agent_session

pytestmark = pytest.mark.anyio


def scripted(model_id: str, script: list[Any] | None) -> RegisteredModel:
    return RegisteredModel(
        id=model_id,
        context_window_tokens=1000,
        max_output_tokens=400,
        max_reasoning_tokens=None,
        accepts_data_blocks=True,
        fixed_reserve_tokens=0,
        safety_margin_tokens=0,
        token_counter="estimate",
        provider_kind="scripted" if script is not None else "local",
        provider_base_url=None,
        provider_model_name=None,
        provider_api_key_env=None,
        script=script,
    )


async def take(factory: SessionFactory, model_id: str, session_id: str) -> Any:
    async with unit_of_work(factory) as db:
        return await ModelRepository(db).take_script_entry("default", model_id, session_id)


async def test_script_position_advances_atomically_under_concurrency(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    model_id = f"scripted/{uuid.uuid4().hex}"
    sid = await make_session()
    async with unit_of_work(factory) as db:
        _, created = await ModelRepository(db).put(
            scripted(model_id, [{"text": f"answer {i}"} for i in range(12)])
        )
    assert created
    takes = await asyncio.gather(*(take(factory, model_id, sid) for _ in range(14)))
    indices = sorted(t.index for t in takes)
    assert indices == list(range(14))
    assert sorted(t.entry["text"] for t in takes if t.entry) == sorted(
        f"answer {i}" for i in range(12)
    )
    assert sum(t.entry is None for t in takes) == 2  # ran out: never cycles

    async with unit_of_work(factory) as db:
        model, created = await ModelRepository(db).put(scripted(model_id, [{"text": "new"}]))
    assert not created
    assert model.script_position == 0
    first = await take(factory, model_id, sid)
    assert (first.index, first.entry) == (0, {"text": "new"})


async def test_each_session_replays_the_script_from_its_first_entry(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    """A second session of a scripted model is not told the script "has no entry left"."""
    model_id = f"scripted/{uuid.uuid4().hex}"
    one, two = await make_session(), await make_session()
    async with unit_of_work(factory) as db:
        await ModelRepository(db).put(scripted(model_id, [{"text": "a"}, {"text": "b"}]))
    assert [(await take(factory, model_id, one)).entry for _ in range(2)] == [
        {"text": "a"},
        {"text": "b"},
    ]
    assert (await take(factory, model_id, one)).entry is None  # this session ran out
    assert (await take(factory, model_id, two)).entry == {"text": "a"}
    async with unit_of_work(factory) as db:
        model = await ModelRepository(db).get("default", model_id)
    assert model is not None
    assert model.script_position == 4  # the calls of every session since the last PUT


async def test_models_crud(factory: SessionFactory, make_session: MakeSession) -> None:
    model_id = f"local/{uuid.uuid4().hex}"
    sid = await make_session()
    async with unit_of_work(factory) as db:
        await ModelRepository(db).put(scripted(model_id, None))
    async with unit_of_work(factory) as db:
        repo = ModelRepository(db)
        model = await repo.get("default", model_id)
        assert model is not None
        assert model.capabilities().limits().effective_input_tokens == 600
        assert model_id in {m.id for m in await repo.list_all(["default"])}
        assert await repo.take_script_entry("default", model_id, sid) is None  # no script
        assert await repo.delete("default", model_id)
        assert not await repo.delete("default", model_id)
        assert await repo.take_script_entry("default", model_id, sid) is None


async def test_calibration_keeps_the_latest_samples(factory: SessionFactory) -> None:
    model_id = f"m/{uuid.uuid4().hex}"
    for i in range(5):
        async with unit_of_work(factory) as db:
            await CalibrationRepository(db).add(
                model_id=model_id,
                counter="estimate",
                estimated_input_tokens=100 + i,
                reported_input_tokens=110 + i,
                keep=3,
            )
    async with unit_of_work(factory, read_only=True) as db:
        samples = await CalibrationRepository(db).recent(model_id, "estimate")
    assert [s.estimated_input_tokens for s in samples] == [104, 103, 102]


def owned(tenant_id: str, model_id: str, script: list[Any]) -> RegisteredModel:
    row = scripted(model_id, script)
    row.tenant_id = tenant_id
    return row


async def session_of(factory: SessionFactory, tenant_id: str) -> str:
    row = new_agent_session()
    row.tenant_id = tenant_id
    async with unit_of_work(factory) as db:
        return (await SessionRepository(db).add(row)).id


async def take_of(factory: SessionFactory, tenant_id: str, model_id: str, sid: str) -> Any:
    async with unit_of_work(factory) as db:
        return await ModelRepository(db).take_script_entry(tenant_id, model_id, sid)


async def put(factory: SessionFactory, row: RegisteredModel) -> None:
    async with unit_of_work(factory) as db:
        await ModelRepository(db).put(row)


async def test_a_put_resets_only_its_own_tenants_sessions(factory: SessionFactory) -> None:
    """Tenants A and B each have a scripted model of the same id (spec §14.2: a PUT resets
    the script, of that tenant's model only)."""
    model_id = f"scripted/{uuid.uuid4().hex}"
    tenant_a, tenant_b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    await put(factory, owned(tenant_a, model_id, [{"text": "a1"}, {"text": "a2"}]))
    await put(factory, owned(tenant_b, model_id, [{"text": "b1"}, {"text": "b2"}]))
    session_a, session_b = await session_of(factory, tenant_a), await session_of(factory, tenant_b)
    assert (await take_of(factory, tenant_a, model_id, session_a)).entry == {"text": "a1"}
    assert (await take_of(factory, tenant_b, model_id, session_b)).entry == {"text": "b1"}

    await put(factory, owned(tenant_a, model_id, [{"text": "a1'"}]))
    taken_b = await take_of(factory, tenant_b, model_id, session_b)
    assert (taken_b.index, taken_b.entry) == (1, {"text": "b2"})  # B's session kept its place
    taken_a = await take_of(factory, tenant_a, model_id, session_a)
    assert (taken_a.index, taken_a.entry) == (0, {"text": "a1'"})  # A's started over

    await put(factory, owned(tenant_b, model_id, [{"text": "b1'"}]))
    taken_b = await take_of(factory, tenant_b, model_id, session_b)
    assert (taken_b.index, taken_b.entry) == (0, {"text": "b1'"})
    taken_a = await take_of(factory, tenant_a, model_id, session_a)
    assert (taken_a.index, taken_a.entry) == (1, None)  # A's ran out; B's PUT did not reset it


async def test_a_put_of_a_shared_model_resets_every_tenants_sessions(
    factory: SessionFactory,
) -> None:
    model_id = f"scripted/{uuid.uuid4().hex}"
    tenant_a, tenant_b = f"a-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
    await put(factory, owned(SHARED_TENANT, model_id, [{"text": "s1"}, {"text": "s2"}]))
    session_a, session_b = await session_of(factory, tenant_a), await session_of(factory, tenant_b)
    for sid in (session_a, session_b):
        assert (await take_of(factory, SHARED_TENANT, model_id, sid)).entry == {"text": "s1"}
    await put(factory, owned(SHARED_TENANT, model_id, [{"text": "s1'"}]))
    for sid in (session_a, session_b):
        taken = await take_of(factory, SHARED_TENANT, model_id, sid)
        assert (taken.index, taken.entry) == (0, {"text": "s1'"})
