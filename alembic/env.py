"""Alembic environment for ctxsvc.

Three ways in, checked in this order:
1. ``config.attributes["connection"]``: a live synchronous ``Connection`` (programmatic use from
   ``app.storage.migrate``, through ``AsyncConnection.run_sync``); migrations run on it, inside
   the caller's transaction.
2. A URL: ``config.attributes["url"]``, else ``-x url=…``, else ``sqlalchemy.url`` in the ini, else
   the ``CTXSVC_DATABASE_URL`` environment variable, in any form the service takes
   (``sqlite:///x.db``, ``postgres://…``: ``app.storage.urls``). An async engine is created from
   it with the service's own ``create_engine`` (so SQLite gets the same pragmas and
   transactional BEGIN).
3. Offline mode (``--sql``) renders SQL for the URL's dialect.
"""

from __future__ import annotations

import asyncio
import os
from logging.config import fileConfig

from sqlalchemy.engine import Connection

from alembic import context
from app.storage.database import create_engine, sqlite_database_path
from app.storage.models import Base
from app.storage.urls import async_database_url

config = context.config
# Only the command line has an ini file; programmatic callers keep their own logging.
if config.config_file_name is not None:
    fileConfig(config.config_file_name, disable_existing_loggers=False)
target_metadata = Base.metadata


def _url() -> str:
    url = (
        config.attributes.get("url")
        or context.get_x_argument(as_dictionary=True).get("url")
        or config.get_main_option("sqlalchemy.url")
        or os.environ.get("CTXSVC_DATABASE_URL")
    )
    if not url:
        raise RuntimeError(
            "no database URL: pass -x url=..., set config.attributes['url'] or CTXSVC_DATABASE_URL"
        )
    return async_database_url(str(url))


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things; batch mode rebuilds the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        # SQLite DDL is transactional too once SQLAlchemy emits BEGIN itself (as the service's
        # engine does): a failed migration leaves the schema untouched on both backends.
        transactional_ddl=True,
        compare_type=True,
        compare_server_default=True,
        transaction_per_migration=False,
    )


def _run_on(connection: Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


async def _run_online_with_url(url: str) -> None:
    path = sqlite_database_path(url)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run_on)
            await connection.commit()
    finally:
        await engine.dispose()


def run_migrations_offline() -> None:
    context.configure(
        url=_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run_on(connection)
    else:
        asyncio.run(_run_online_with_url(_url()))


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
