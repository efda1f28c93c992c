"""A compaction takes every fact of its checkpoint from the conversation up to its boundary,
even when messages are appended while it reads (on PostgreSQL each statement of a transaction
sees what others committed before it)."""

from __future__ import annotations

import pytest
from sqlalchemy.ext.asyncio import AsyncSession

from app.services.compaction.source import load_source
from app.storage.database import unit_of_work
from app.storage.models import AgentSession
from tests.api.helpers import append, assistant, new_session, user
from tests.services.compaction.conftest import Harness

pytestmark = pytest.mark.anyio


async def test_an_append_after_the_boundary_is_read_is_not_part_of_the_checkpoint(
    harness: Harness,
) -> None:
    h = harness
    sid = await new_session(h.api)
    await append(h.api, sid, user("Fix the parser."), assistant("Looking at it."))

    async def append_meanwhile(db: AsyncSession, session: AgentSession, last: int) -> int:
        # Another writer commits a user request right after the boundary was fixed.
        response = await append(h.api, sid, user("A request after the boundary."))
        assert response.status_code == 201, response.text
        return last

    async with unit_of_work(h.container.db, read_only=True) as db:
        source = await load_source(
            db, sid, h.container.counter, turn_id=None, covered=append_meanwhile
        )

    assert source.through == 2
    assert source.last_user.sequence == 1
    assert [item.sequence for item in source.items] == [1, 2]
    # The summary model is not asked to summarize what the checkpoint does not cover.
    assert "after the boundary" not in str(source.summary_request.request["messages"])
