"""A stored prepare extends the process's last read of the session (``ConversationCache``): what
it answers is what a fresh read answers, whatever another replica stored or installed since."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.helpers import append, assistant, new_session, user
from tests.conftest import client_for, make_settings

pytestmark = pytest.mark.anyio


async def _context(api: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    response = await api.get(f"/v1/sessions/{sid}/context")
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


async def test_a_kept_read_answers_what_a_fresh_read_answers(database_url: str) -> None:
    # Two replicas on one database, and a third that keeps nothing (the fresh read).
    async for one in client_for(make_settings(database_url)):
        async for other in client_for(make_settings(database_url)):
            async for fresh in client_for(make_settings(database_url, conversation_cache_bytes=0)):
                sid = await new_session(one)
                assert (await append(one, sid, user("one"), assistant("two"))).status_code == 201
                first = await _context(one, sid)  # kept by this replica
                assert len(first["request"]["messages"]) == 3  # system part + 2

                # Stored by the other replica: the kept read is extended with it.
                assert (await append(other, sid, user("three"))).status_code == 201
                extended = await _context(one, sid)
                assert extended == await _context(fresh, sid)
                assert extended["request"]["messages"][-1]["content"] == [
                    {"type": "text", "text": "three"}
                ]

                # A checkpoint installed by the other replica: the kept read is not reused.
                compaction = await other.post(
                    f"/v1/sessions/{sid}/compactions", json={"allow_larger": True}
                )
                assert compaction.status_code == 201, compaction.text
                compacted = await _context(one, sid)
                assert compacted == await _context(fresh, sid)
                reasons = [p.get("reason") for p in compacted["provenance"]]
                assert reasons == [
                    "last_user_request_replay",
                    "compaction_summary",
                    "system_reminder",
                ]

                # And the next append after it extends the new read.
                assert (await append(other, sid, user("four"))).status_code == 201
                assert await _context(one, sid) == await _context(fresh, sid)
