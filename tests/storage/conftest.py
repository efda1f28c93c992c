"""Storage-test helpers; the database fixtures themselves live in ``tests/conftest.py``.

PostgreSQL tests share one database per run and isolate themselves with fresh random ids (they
must commit: concurrency is what they test).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import pytest

from app.storage.database import SessionFactory, unit_of_work
from app.storage.models import AgentSession
from app.storage.repositories import SessionRepository


def new_agent_session(session_id: str | None = None) -> AgentSession:
    return AgentSession(
        id=session_id or f"ses-{uuid.uuid4().hex}",
        title=None,
        model_id="local/test",
        summary_model_id="local/test",
        agent={"system_prompt": "You are a test.", "tools": [], "max_model_calls": 20},
        workspace=None,
        sandbox={"mode": "auto", "available": True},
        disabled_skills=[],
    )


MakeSession = Callable[[], Awaitable[str]]


@pytest.fixture
def make_session(factory: SessionFactory) -> MakeSession:
    """Create (and commit) a fresh session; returns its id."""

    async def make() -> str:
        async with unit_of_work(factory) as db:
            row = await SessionRepository(db).add(new_agent_session())
        return row.id

    return make
