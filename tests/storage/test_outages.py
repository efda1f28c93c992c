"""Which database failures are outages (503 ``database_unavailable``) and which are not: read
from real drivers' errors, never from message text."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, IntegrityError

from app.storage.database import create_engine
from app.storage.migrate import is_at_head
from app.storage.outages import Outages, describe, outage_of
from tests.conftest import BACKENDS

pytestmark = pytest.mark.anyio


async def failure(url: str, statement: str) -> DBAPIError:
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text(statement))
    except DBAPIError as exc:
        return exc
    finally:
        await engine.dispose()
    raise AssertionError(f"{statement!r} did not fail")


@pytest.mark.postgres
async def test_a_read_only_postgresql_is_an_outage(postgres_url: str) -> None:
    read_only = postgres_url + "?options=-c%20default_transaction_read_only%3Don"
    exc = await failure(read_only, "CREATE TEMP TABLE probe (x int)")
    assert outage_of(exc) == "read_only"
    assert "SQLSTATE 25006" in describe(exc)


@pytest.mark.postgres
async def test_an_unreachable_postgresql_is_an_outage(postgres_url: str) -> None:
    from sqlalchemy.engine import make_url

    closed = make_url(postgres_url).set(port=1).render_as_string(hide_password=False)
    exc = await failure(closed, "SELECT 1")
    assert outage_of(exc) == "unreachable"


async def test_a_constraint_or_a_syntax_error_is_not_an_outage(database_url: str) -> None:
    exc = await failure(database_url, "SELEKT 1")
    assert outage_of(exc) is None
    assert outage_of(IntegrityError("INSERT", {}, sqlite3.IntegrityError("x"))) is None


async def test_a_read_only_sqlite_file_is_an_outage(tmp_path: Path) -> None:
    path = tmp_path / "ro.db"
    sqlite3.connect(path).close()
    path.chmod(0o444)
    sqlite3_url = f"sqlite+aiosqlite:///file:{path}?mode=ro&uri=true"
    exc = await failure(sqlite3_url, "CREATE TABLE probe (x int)")
    assert outage_of(exc) == "read_only"


def test_outage_lines_are_rate_limited_per_kind(caplog: pytest.LogCaptureFixture) -> None:
    now = [100.0]
    outages = Outages("postgresql+psycopg://h/db", clock=lambda: now[0])
    error = ConnectionRefusedError("refused")
    with caplog.at_level("WARNING", logger="ctxsvc.database"):
        for _ in range(50):
            outages.seen("unreachable", error)
        outages.seen("full", error)
        assert outages.write_problem() == "full"
        now[0] += 31
        outages.seen("unreachable", error)
        outages.writes_succeeded()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 4, lines  # unreachable, full, unreachable again (49 more), recovered
    assert "49 more" in lines[2]
    assert lines[3] == "database available again"
    assert outages.write_problem() is None


@pytest.fixture(params=BACKENDS)
def unreachable_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database that does not answer: a closed port, a SQLite file in no directory."""
    if request.param == "postgresql":
        from sqlalchemy.engine import make_url

        url = make_url(str(request.getfixturevalue("postgres_url")))
        return url.set(port=1).render_as_string(hide_password=False)
    return f"sqlite+aiosqlite:///{tmp_path / 'no-such-dir' / 'ctxsvc.db'}"


async def test_readiness_probes_of_a_database_that_is_away_log_one_line_without_its_text(
    unreachable_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    engine = create_engine(unreachable_url)
    outages = Outages(unreachable_url)
    try:
        with caplog.at_level("DEBUG"):
            for _ in range(10):  # an orchestrator probing every few seconds
                assert not await is_at_head(engine, outages)
    finally:
        await engine.dispose()
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1, lines
    assert lines[0].startswith("database unavailable ("), lines
    # The class (and SQLSTATE or SQLite code), never the driver's text.
    for text_of_the_error in ("port 1", "refused", "unable to open", "no-such-dir"):
        assert text_of_the_error not in lines[0].lower(), lines[0]


def test_a_probe_failure_that_is_no_outage_is_rate_limited_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    outages = Outages("postgresql+psycopg://h/db", clock=lambda: now[0])
    error = sqlite3.DatabaseError("no such table: alembic_version holds 'secret row text'")
    with caplog.at_level("WARNING", logger="ctxsvc.database"):
        for _ in range(5):
            outages.probe_failed(error)
        now[0] += 31
        outages.probe_failed(error)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert all(line.startswith("database not ready (sqlite3.DatabaseError") for line in lines)
    assert "4 more" in lines[1]
    assert not any("secret" in line for line in lines)
