"""Plain text logs (``CTXSVC_JSON_LOGS=false``) withhold a database error's text as the JSON
lines do: PostgreSQL's DETAIL quotes the failing row ("Failing row contains (…)"), i.e. a
summary or a user's message, and logs carry no content."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from fastapi import FastAPI
from sqlalchemy.exc import IntegrityError

from app.main import create_app
from app.observability.logs import TextFormatter
from app.storage.database import unit_of_work
from app.storage.repositories import CompactionRepository, SessionRepository
from tests.conftest import make_settings
from tests.storage.conftest import new_agent_session
from tests.storage.test_compactions import SUMMARY, checkpoint

pytestmark = pytest.mark.anyio

MARKER = "PRIVATE-SUMMARY-52be07d9"


@contextmanager
def no_host_logging() -> Iterator[None]:
    """The root logger as ``ctxsvc serve`` leaves it (no handler), restored afterwards (inside
    the test: pytest adds its own handlers once the fixtures are set up)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers[:] = []
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest.mark.postgres
async def test_a_constraint_failure_in_text_mode_logs_no_row_content(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    app = create_app(make_settings(postgres_url, json_logs=False))
    with no_host_logging():
        await fail_a_constraint_and_log_it(app)
    err = capsys.readouterr().err
    assert "unexpected error in POST /x" in err
    assert "IntegrityError" in err
    assert "text withheld" in err
    assert "SQLSTATE 23514" in err
    assert MARKER not in err
    assert "Failing row" not in err


async def fail_a_constraint_and_log_it(app: FastAPI) -> None:
    async with app.router.lifespan_context(app):
        db = app.state.container.db
        async with unit_of_work(db) as session:
            sid = (await SessionRepository(session).add(new_agent_session())).id
        # Names a last user message after the facts it covers: the CHECK constraint refuses it.
        row = checkpoint(sid, "c1", summary=MARKER + SUMMARY, last_user_message_sequence=11)
        refused: IntegrityError | None = None
        try:
            async with unit_of_work(db) as session:
                await CompactionRepository(session).add(row)
        except IntegrityError as exc:
            refused = exc
        assert refused is not None, "the constraint did not refuse the row"
        # What an unredacted traceback would print (PostgreSQL cuts each value at 64 bytes).
        assert MARKER in str(refused)
        # As the error middleware logs an exception no handler took.
        logging.getLogger("ctxsvc.errors").error("unexpected error in POST /x", exc_info=refused)


def test_the_text_formatter_ignores_a_traceback_another_formatter_cached() -> None:
    try:
        raise IntegrityError("INSERT", {}, ValueError(f"Failing row contains ({MARKER})"))
    except IntegrityError:
        record = logging.LogRecord("t", logging.ERROR, "", 0, "a write failed", None, None)
        record.exc_info = sys.exc_info()
    unredacted = logging.Formatter().format(record)  # a host's handler, first in line
    assert MARKER in unredacted
    text = TextFormatter().format(record)
    assert "a write failed" in text
    assert "text withheld" in text
    assert MARKER not in text
