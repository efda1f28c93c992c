"""Revision ``2026_12_02_1000`` (prompt caching): models registered before it cache by default,
earlier turns wrote nothing to a cache, a stored value the API could not write still reads, and
the downgrade takes both columns away again; on both backends."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from alembic.script import ScriptDirectory

from app.storage.base import UTCDateTime
from app.storage.database import create_session_factory, unit_of_work
from app.storage.migrate import alembic_config, upgrade_to_head
from app.storage.models import Turn
from app.storage.repositories import SessionRepository, TurnRepository
from app.storage.repositories.registry import ModelRepository
from app.storage.repositories.turn_usage import usage_by_session
from tests.storage.conftest import new_agent_session
from tests.storage.test_migrated_rows import _columns
from tests.storage.test_migrations import _downgrade_to, _engine_at_head

pytestmark = pytest.mark.anyio

REVISION = "2026_12_02_1000"

_old_models = sa.table(
    "models",
    *(
        sa.column(name)
        for name in (
            "id",
            "context_window_tokens",
            "max_output_tokens",
            "max_reasoning_tokens",
            "accepts_data_blocks",
            "fixed_reserve_tokens",
            "safety_margin_tokens",
            "token_counter",
            "provider_kind",
            "script_position",
        )
    ),
    sa.column("created_at", UTCDateTime()),
    sa.column("updated_at", UTCDateTime()),
)
_old_turns = sa.table(
    "turns",
    *(
        sa.column(c.name, c.type)
        for c in Turn.__table__.columns
        if c.name not in ("cache_creation_tokens", "tool_results_deadline")
    ),
)


def _before() -> str:
    down = ScriptDirectory.from_config(alembic_config()).get_revision(REVISION).down_revision
    assert isinstance(down, str)
    return down


async def test_earlier_models_cache_and_earlier_turns_wrote_nothing(
    empty_database_url: str,
) -> None:
    engine = await _engine_at_head(empty_database_url)
    factory = create_session_factory(engine)
    now = datetime.now(UTC)
    try:
        async with unit_of_work(factory) as db:
            sid = (await SessionRepository(db).add(new_agent_session())).id
        await _downgrade_to(engine, _before())
        assert "prompt_caching" not in await _columns(engine, "models")
        async with engine.begin() as connection:
            for model_id in ("old", "odd"):
                await connection.execute(
                    sa.insert(_old_models).values(
                        id=model_id,
                        context_window_tokens=1000,
                        max_output_tokens=100,
                        max_reasoning_tokens=None,
                        accepts_data_blocks=True,
                        fixed_reserve_tokens=0,
                        safety_margin_tokens=0,
                        token_counter="estimate",
                        provider_kind="local",
                        script_position=0,
                        created_at=now,
                        updated_at=now,
                    )
                )
            await connection.execute(
                sa.insert(_old_turns).values(
                    session_id=sid,
                    turn_id="t-old",
                    client_request_id="r",
                    status="completed",
                    phase="terminal",
                    input=[],
                    model_call_index=1,
                    pending_tool_calls=[],
                    input_tokens=900,
                    output_tokens=10,
                    cached_tokens=800,
                    reasoning_tokens=0,
                    cancel_requested=False,
                    created_at=now,
                    updated_at=now,
                    finished_at=now,
                    outcome={"final_text": "ok"},
                )
            )
        await upgrade_to_head(empty_database_url)
        # A value no API request can store (written by hand) reads as the default.
        async with engine.begin() as connection:
            await connection.execute(
                sa.text("UPDATE models SET prompt_caching = 'odd' WHERE id = 'odd'")
            )

        async with unit_of_work(factory, read_only=True) as db:
            models = ModelRepository(db)
            old, odd = await models.get("default", "old"), await models.get("default", "odd")
            turn = await TurnRepository(db).get(sid, "t-old")
            usage = (await usage_by_session(db, [sid]))[sid]
        assert old is not None
        assert odd is not None
        assert turn is not None
        assert old.prompt_caching == "auto"
        assert old.capabilities().prompt_caching == "auto"
        assert odd.capabilities().prompt_caching == "auto"
        assert turn.cache_creation_tokens == 0
        assert (usage.cached_tokens, usage.cache_creation_tokens) == (800, 0)

        await _downgrade_to(engine, _before())
        assert "prompt_caching" not in await _columns(engine, "models")
        assert "cache_creation_tokens" not in await _columns(engine, "turns")
        assert "cached_tokens" in await _columns(engine, "turns")
    finally:
        await engine.dispose()
