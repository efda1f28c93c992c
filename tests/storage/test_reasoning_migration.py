"""Revision ``2026_12_05_1730`` (model column ``reasoning``): a model registered before it with
kind ``openai_responses`` asked for the reasoning state at every call and keeps doing so; every
other model reads as not reasoning; the downgrade takes the column away; on both backends."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from app.storage.database import create_session_factory, unit_of_work
from app.storage.models import RegisteredModel
from app.storage.repositories.registry import ModelRepository
from tests.storage.test_migrated_rows import _columns
from tests.storage.test_migrations import _downgrade_to, _engine_at_head, _upgrade_to

pytestmark = pytest.mark.anyio

BEFORE = "2026_12_05_1610"

_old_models = sa.table(
    "models",
    *(
        sa.column(c.name, c.type)
        for c in RegisteredModel.__table__.columns
        if c.name != "reasoning"
    ),
)


async def test_earlier_responses_models_keep_asking_for_the_reasoning_state(
    empty_database_url: str,
) -> None:
    engine = await _engine_at_head(empty_database_url)
    factory = create_session_factory(engine)
    now = datetime.now(UTC)
    try:
        await _downgrade_to(engine, BEFORE)
        assert "reasoning" not in await _columns(engine, "models")
        async with engine.begin() as connection:
            for model_id, kind in (("o3-old", "openai_responses"), ("chat-old", "openai_chat")):
                await connection.execute(
                    sa.insert(_old_models).values(
                        tenant_id="default",
                        id=model_id,
                        context_window_tokens=200_000,
                        max_output_tokens=100_000,
                        max_reasoning_tokens=None,
                        accepts_data_blocks=True,
                        fixed_reserve_tokens=0,
                        safety_margin_tokens=0,
                        output_reserve_tokens=None,
                        token_counter="estimate",
                        prompt_caching="auto",
                        provider_kind=kind,
                        provider_base_url="https://api.openai.com/v1",
                        provider_model_name=model_id,
                        provider_api_key_env="OPENAI_API_KEY",
                        script=None,
                        script_position=0,
                        created_at=now,
                        updated_at=now,
                    )
                )
        await _upgrade_to(engine, "head")

        async with unit_of_work(factory, read_only=True) as db:
            models = ModelRepository(db)
            responses = await models.get("default", "o3-old")
            chat = await models.get("default", "chat-old")
        assert responses is not None
        assert chat is not None
        assert responses.capabilities().reasoning is True
        assert chat.capabilities().reasoning is False

        await _downgrade_to(engine, BEFORE)
        assert "reasoning" not in await _columns(engine, "models")
    finally:
        await engine.dispose()
