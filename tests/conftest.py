"""Shared fixtures: migrated databases on SQLite and PostgreSQL, and ASGI clients of the app.

- SQLite: one migrated template file per test run (per xdist worker: ``scripts/test.sh`` runs
  two), copied for each test (isolated and cheap).
- PostgreSQL: one fresh database per test run (per worker) on the server named by
  ``CTXSVC_TEST_POSTGRES_URL``,
  migrated with Alembic and dropped at the end; tests isolate themselves with fresh ids. When the
  server is unreachable the PostgreSQL cases skip locally but fail under ``CI=true``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from app.main import create_app
from app.settings import Settings
from app.storage.database import SessionFactory, create_engine, create_session_factory
from app.storage.migrate import upgrade_to_head

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
]


@contextmanager
def recorded_statements(engine: AsyncEngine) -> Iterator[list[str]]:
    """The SQL of every statement ``engine`` sends while the block runs, in order."""
    statements: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        statements.append(statement)

    event.listen(engine.sync_engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", record)


def touching(statements: list[str], table: str) -> list[str]:
    """The statements that name ``table``."""
    return [s for s in statements if table in s]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def admin_conninfo(url: str) -> str:
    # psycopg speaks libpq URLs: drop SQLAlchemy's "+psycopg" driver suffix.
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@contextmanager
def throwaway_postgres_database() -> Iterator[str]:
    """Create an empty ``ctxsvc_test_<random>`` database, yield its URL, drop it afterwards.

    Skips when the server is unreachable, except under ``CI=true`` where it fails."""
    base = os.environ.get("CTXSVC_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
    name = f"ctxsvc_test_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(admin_conninfo(base), autocommit=True, connect_timeout=5) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        message = f"PostgreSQL at {make_url(base).render_as_string()} is unreachable: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message} (CI=true: PostgreSQL tests must run, not skip)")
        pytest.skip(message)
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin_conninfo(base), autocommit=True) as admin:
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


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> str:
    path = tmp_path / "ctxsvc.db"
    shutil.copyfile(sqlite_template, path)
    return f"sqlite+aiosqlite:///{path}"


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest) -> str:
    """A migrated database URL, once per backend."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("postgres_url"))
    return str(request.getfixturevalue("sqlite_url"))


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


def make_settings(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "migrate_on_start": False,
        "json_logs": False,
        "max_body_bytes": 2_000_000,
        # The fake providers listen on loopback, which the service refuses by default
        # (``app.providers.destinations``); a test of that default passes False.
        "allow_private_model_hosts": True,
    }
    values.update(overrides)
    return Settings(**values)


async def client_for(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """An ASGI client of an app built from ``settings``, its lifespan running."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client


@pytest.fixture
async def api(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app on a migrated database, once per backend."""
    async for client in client_for(make_settings(database_url)):
        yield client


@pytest.fixture
async def sqlite_api(sqlite_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app on a migrated SQLite database (for tests that need one backend)."""
    async for client in client_for(make_settings(sqlite_url)):
        yield client
