"""Database fixtures for the storage tests, on SQLite and PostgreSQL.

- SQLite: one migrated template file per test run, copied for each test (full isolation, cheap).
- PostgreSQL: one fresh database per test run (``ctxsvc_test_<random>``) on the server named by
  ``CTXSVC_TEST_POSTGRES_URL``, migrated with Alembic and dropped at the end. Tests share it and
  isolate themselves with fresh random ids (they must commit: concurrency is what they test).
  When the server is unreachable the PostgreSQL cases skip locally but fail under ``CI=true``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app.storage.database import SessionFactory, create_engine, create_session_factory, unit_of_work
from app.storage.migrate import upgrade_to_head
from app.storage.models import AgentSession
from app.storage.repositories import SessionRepository

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _admin_conninfo(url: str) -> str:
    # psycopg speaks libpq URLs: drop SQLAlchemy's "+psycopg" driver suffix.
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@contextmanager
def throwaway_postgres_database() -> Iterator[str]:
    """Create an empty ``ctxsvc_test_<random>`` database, yield its URL, drop it afterwards.

    Skips when the server is unreachable, except under ``CI=true`` where it fails."""
    base = os.environ.get("CTXSVC_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    name = f"ctxsvc_test_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(_admin_conninfo(base), autocommit=True, connect_timeout=5) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        message = f"PostgreSQL at {make_url(base).render_as_string()} is unreachable: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message} (CI=true: PostgreSQL tests must run, not skip)")
        pytest.skip(message)
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(_admin_conninfo(base), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """URL of a migrated, throw-away PostgreSQL database for this test run."""
    with throwaway_postgres_database() as url:
        asyncio.run(upgrade_to_head(url))
        yield url


@pytest.fixture(params=BACKENDS)
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database with no schema yet (not migrated), once per backend."""
    if request.param == "postgresql":
        with throwaway_postgres_database() as url:
            yield url
    else:
        yield f"sqlite+aiosqlite:///{tmp_path / 'fresh' / 'ctxsvc.db'}"


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "ctxsvc.db"
    asyncio.run(upgrade_to_head(f"sqlite+aiosqlite:///{path}"))
    return path


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated database URL, once per backend."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    template: Path = request.getfixturevalue("sqlite_template")
    path = tmp_path / "ctxsvc.db"
    shutil.copyfile(template, path)
    return f"sqlite+aiosqlite:///{path}"


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = create_engine(database_url)
    try:
        yield engine
    finally:
        await engine.dispose()


@pytest.fixture
def factory(engine: AsyncEngine) -> SessionFactory:
    return create_session_factory(engine)


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
