"""A checkpoint the database refuses logs what failed, never what the row held: no SQL
parameters, no PostgreSQL "Failing row contains (…)" (the summary, a user's message)."""

from __future__ import annotations

import logging
import sys

import pytest
from sqlalchemy.exc import IntegrityError

from app.core.errors import Unavailable
from app.observability.logs import JsonFormatter
from app.services.compaction.persist import store_checkpoint
from app.services.events import EventHub, EventPublisher
from app.storage.database import SessionFactory, unit_of_work
from app.storage.repositories import CompactionRepository, SessionRepository
from tests.storage.conftest import MakeSession, new_agent_session
from tests.storage.test_compactions import SUMMARY, checkpoint

pytestmark = pytest.mark.anyio

MARKER = "PRIVATE-SUMMARY-7f3a91c2"


@pytest.fixture
def make_session(factory: SessionFactory) -> MakeSession:
    async def make() -> str:
        async with unit_of_work(factory) as db:
            return (await SessionRepository(db).add(new_agent_session())).id

    return make


async def test_a_refused_checkpoint_logs_no_content(
    factory: SessionFactory, make_session: MakeSession, caplog: pytest.LogCaptureFixture
) -> None:
    sid = await make_session()
    # Names a last user message after the facts it covers: the CHECK constraint refuses it.
    row = checkpoint(sid, "c1", summary=SUMMARY + MARKER, last_user_message_sequence=11)
    events = EventPublisher(EventHub())
    with caplog.at_level(logging.DEBUG), pytest.raises(Unavailable) as refused:
        async with unit_of_work(factory) as db:
            await store_checkpoint(db, events, row, base_compaction_id=None)
    assert refused.value.code == "persistence_error"
    formatter = JsonFormatter()
    lines = [formatter.format(record) for record in caplog.records]
    failed = [line for line in lines if "checkpoint write failed" in line]
    assert len(failed) == 1, lines
    assert "last_user_within_facts" in failed[0] or "IntegrityError" in failed[0]
    for line in lines:
        assert MARKER not in line
        assert "Failing row" not in line
        assert "parameters" not in line


async def test_the_json_formatter_withholds_a_database_errors_text(
    factory: SessionFactory, make_session: MakeSession
) -> None:
    sid = await make_session()
    row = checkpoint(sid, "c1", summary=SUMMARY + MARKER, last_user_message_sequence=11)
    record = logging.LogRecord("t", logging.ERROR, "", 0, "a write failed", None, None)
    try:
        async with unit_of_work(factory) as db:
            await CompactionRepository(db).add(row)
    except IntegrityError:
        record.exc_info = sys.exc_info()
    assert record.exc_info is not None, "the constraint did not refuse the row"
    text = JsonFormatter().format(record)
    assert "IntegrityError" in text
    assert "text withheld" in text
    assert MARKER not in text
    assert "Failing row" not in text
