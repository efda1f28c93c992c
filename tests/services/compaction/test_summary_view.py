"""A session holding a message no limit of today would accept (stored by an older version)
still compacts and goes on: the summary request is a bounded view of what it covers, and the
transcript keeps the raw text."""

from __future__ import annotations

import pytest

from app.core.content import text_block
from app.storage.database import unit_of_work
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.records import NewMessage
from tests.api.helpers import append, assistant, new_session, run_turn, user
from tests.services.compaction.conftest import Harness

pytestmark = pytest.mark.anyio

HUGE = "".join(f"line {i}: the log goes on\n" for i in range(160_000))  # about 4 MB


async def test_a_session_with_a_4_mb_message_compacts_and_takes_the_next_turn(
    harness: Harness,
) -> None:
    h = harness
    sid = await new_session(h.api)  # the offline ``local`` model: a 32 000-token window
    await append(h.api, sid, user("Fix the flaky login test."), assistant("On it."))
    async with unit_of_work(h.container.db) as db:  # as an older version stored it
        await MessageRepository(db).append(
            sid, [NewMessage(role="user", kind="normal", content=[text_block(HUGE)])]
        )
    await append(h.api, sid, assistant("That is a long log."))

    request = await h.api.get(f"/v1/sessions/{sid}/compactions/request")
    assert request.status_code == 200, request.text
    budget = request.json()["budget"]
    assert budget["estimated_input_tokens"] <= budget["effective_input_tokens"]
    sent = str(request.json()["request"]["messages"])
    assert "[cut for the summary: " in sent
    assert "the transcript keeps this message in full" in sent

    compacted = await h.api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    assert compacted.status_code == 201, compacted.text
    turn = await run_turn(h.api, sid, "Now fix it.")
    assert turn["status"] == "completed", turn
    raw = (await h.api.get(f"/v1/sessions/{sid}/messages")).json()["messages"]
    assert raw[2]["content"] == [text_block(HUGE)]  # nothing stored is ever cut
