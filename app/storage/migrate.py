"""Programmatic Alembic: migrate at start-up and tell ``/readyz`` whether the schema is current.

``upgrade_to_head`` is safe to call from every replica at once: on PostgreSQL it holds a
transaction-scoped advisory lock while migrating, and on SQLite the migration transaction begins
IMMEDIATE (and a lock file beside it serializes start-ups), so concurrent callers run one after
the other and the later ones find nothing to do.
The whole upgrade is one transaction on both backends (both have transactional DDL): a failed
migration leaves the schema as it was.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import NullPool

from alembic import command
from app.storage.database import READ_ONLY, create_engine, sqlite_database_path
from app.storage.outages import Outages, describe

__all__ = [
    "ALEMBIC_DIR",
    "AppliedMigration",
    "MigrationReport",
    "alembic_config",
    "head_revisions",
    "is_at_head",
    "upgrade_to_head",
]

logger = logging.getLogger(__name__)

# The migrations live at the repository root (alembic/), beside alembic.ini.
ALEMBIC_DIR = Path(__file__).resolve().parents[2] / "alembic"

# Any constant works; it only has to be the same for every replica. ("ctxsvc" in ASCII.)
_MIGRATION_LOCK_KEY = 0x637478737663


def alembic_config(url: str | None = None) -> Config:
    """An Alembic ``Config`` that needs no ini file (so it configures no logging)."""
    config = Config()
    config.set_main_option("script_location", str(ALEMBIC_DIR))
    if url is not None:
        config.attributes["url"] = url
    return config


@lru_cache(maxsize=1)
def head_revisions() -> frozenset[str]:
    return frozenset(ScriptDirectory.from_config(alembic_config()).get_heads())


@dataclass(frozen=True, slots=True)
class AppliedMigration:
    revision: str
    doc: str  # the first line of the migration's docstring


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """What ``upgrade_to_head`` did: the schema revisions before (empty for a new database) and
    after, and the migrations applied, oldest first (none when it was already current)."""

    before: frozenset[str]
    after: frozenset[str]
    applied: tuple[AppliedMigration, ...]


async def upgrade_to_head(url: str) -> MigrationReport:
    """Create the SQLite file's directory if needed and migrate ``url`` to the latest revision."""
    path = sqlite_database_path(url)
    if path is None:
        return await _upgrade_with(url)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A brand-new SQLite file is switched to WAL by its first connection, and SQLite answers
    # "database is locked" without waiting to anyone who opens it meanwhile; a lock file
    # makes concurrent start-ups (several workers on one file) take turns.
    async with _file_lock(path.with_name(path.name + ".migrate-lock")):
        return await _upgrade_with(url)


async def _upgrade_with(url: str) -> MigrationReport:
    engine = create_engine(url, poolclass=NullPool)
    try:
        async with engine.connect() as connection:
            report = await connection.run_sync(_upgrade)
            await connection.commit()
            return report
    finally:
        await engine.dispose()


@asynccontextmanager
async def _file_lock(path: Path) -> AsyncIterator[None]:
    """Hold an exclusive ``flock`` on ``path`` and remove the file when done (nothing is left
    beside the database). A waiter may have opened the file before its holder removed it: it
    then holds a lock on a name that no longer exists, so it checks, after locking, that ``path``
    is still the file it locked, and starts over if not."""
    while True:
        handle = path.open("a")
        try:
            # flock blocks, so wait for it in a thread rather than on the event loop.
            await asyncio.to_thread(fcntl.flock, handle.fileno(), fcntl.LOCK_EX)
            if not _same_file(handle.fileno(), path):
                continue  # removed (and maybe recreated) while we waited: lock the new one
            try:
                yield
            finally:
                # While still locked: no one can lock it meanwhile.
                await asyncio.to_thread(path.unlink, missing_ok=True)
            return
        finally:
            handle.close()  # releases the lock


def _same_file(fd: int, path: Path) -> bool:
    try:
        named = path.stat()
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)


def _upgrade(connection: Connection) -> MigrationReport:
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK_KEY})
    before = _current_heads(connection)  # read under the lock: another replica may just have run
    config = alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, "head")
    after = _current_heads(connection)
    return MigrationReport(before, after, _applied(config, before, after))


def _applied(
    config: Config, before: frozenset[str], after: frozenset[str]
) -> tuple[AppliedMigration, ...]:
    if before == after or len(before) > 1 or len(after) != 1:
        return ()  # nothing ran (or a branched history, which this project never has)
    script = ScriptDirectory.from_config(config)
    (upper,) = after
    lower = next(iter(before), "base")
    newest_first = script.iterate_revisions(upper, lower)
    return tuple(AppliedMigration(r.revision, r.doc) for r in reversed(list(newest_first)))


async def is_at_head(engine: AsyncEngine, outages: Outages | None = None) -> bool:
    """True when the database answers and its schema is at the latest revision.

    An unreachable database is "not ready", not an error: the reason goes to ``outages``'
    rate-limited log (one line per outage, however often probes come), or is logged here
    without one; either way as the error's class and SQLSTATE, never its text (a driver's
    message can quote a row).
    """
    try:
        async with engine.connect() as connection:
            await connection.execution_options(**{READ_ONLY: True})
            current = await connection.run_sync(_current_heads)
    except (SQLAlchemyError, OSError) as exc:
        if outages is not None:
            outages.probe_failed(exc)
        else:
            logger.warning("database not ready: %s", describe(exc))
        return False
    return current == head_revisions()


def _current_heads(connection: Connection) -> frozenset[str]:
    # Read alembic_version directly: MigrationContext.configure logs two INFO lines per call,
    # which would be noise on every readiness probe of every replica.
    if not inspect(connection).has_table("alembic_version"):
        return frozenset()
    rows = connection.execute(text("SELECT version_num FROM alembic_version"))
    return frozenset(str(row[0]) for row in rows)
