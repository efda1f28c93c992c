from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from app.storage.database import SessionFactory, unit_of_work
from app.storage.models import RegisteredModel
from app.storage.repositories import CalibrationRepository, ModelRepository
from tests.storage.conftest import MakeSession

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
