"""Revision ``2026_12_06_1015`` (session columns ``proxied_*``): a session stored before it reads
as having no proxied call and no proxied usage; the downgrade takes the columns away; on both
backends."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from app.storage.database import create_session_factory, unit_of_work
from app.storage.models import AgentSession
from app.storage.repositories.sessions import SessionRepository
from app.storage.repositories.turn_usage import NO_USAGE, PROXIED_COLUMNS, with_proxied
from tests.storage.test_migrated_rows import _columns
from tests.storage.test_migrations import _downgrade_to, _engine_at_head, _upgrade_to

pytestmark = pytest.mark.anyio

BEFORE = "2026_12_05_1730"

_old_sessions = sa.table(
    "sessions",
    *(
        sa.column(c.name, c.type)
        for c in AgentSession.__table__.columns
        if c.name not in PROXIED_COLUMNS
    ),
)


async def test_an_earlier_session_has_no_proxied_usage(empty_database_url: str) -> None:
    engine = await _engine_at_head(empty_database_url)
    factory = create_session_factory(engine)
    now = datetime.now(UTC)
    try:
        await _downgrade_to(engine, BEFORE)
        assert not set(PROXIED_COLUMNS) & set(await _columns(engine, "sessions"))
        async with engine.begin() as connection:
            await connection.execute(
                sa.insert(_old_sessions).values(
                    id="ses-old",
                    tenant_id="default",
                    model_id="local",
                    summary_model_id="local",
                    agent={"system_prompt": "You help.", "tools": []},
                    sandbox={"mode": "auto", "available": False},
                    disabled_skills=[],
                    last_message_sequence=0,
                    last_event_sequence=0,
                    reload_required=False,
                    mailbox_pending=0,
                    pin_count=0,
                    open_tool_calls=0,
                    world_state_version="unknown",
                    created_at=now,
                    updated_at=now,
                )
            )
        await _upgrade_to(engine, "head")

        async with unit_of_work(factory, read_only=True) as db:
            row = await SessionRepository(db).require("ses-old")
            assert [getattr(row, name) for name in PROXIED_COLUMNS] == [0] * len(PROXIED_COLUMNS)
            assert with_proxied(NO_USAGE, row) == NO_USAGE

        await _downgrade_to(engine, BEFORE)
        assert not set(PROXIED_COLUMNS) & set(await _columns(engine, "sessions"))
    finally:
        await engine.dispose()
