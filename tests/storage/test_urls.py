"""The database URL forms ``CTXSVC_DATABASE_URL`` takes (``app.storage.urls``).

The forms people write are mapped to the async drivers; forms ctxsvc cannot run on are refused
with a reason. ``tests/ops/test_startup.py`` starts real servers on the mapped URLs.
"""

from __future__ import annotations

import re

import pytest

from app.settings import Settings
from app.storage.urls import async_database_url, redacted_url


@pytest.mark.parametrize(
    ("given", "used"),
    [
        ("sqlite:///ctxsvc.db", "sqlite+aiosqlite:///ctxsvc.db"),
        ("sqlite:////srv/data/ctxsvc.db", "sqlite+aiosqlite:////srv/data/ctxsvc.db"),
        ("sqlite:///:memory:", "sqlite+aiosqlite:///:memory:"),
        ("sqlite+aiosqlite:///./data/ctxsvc.db", "sqlite+aiosqlite:///./data/ctxsvc.db"),
        ("postgresql://app@db.internal/ctxsvc", "postgresql+psycopg://app@db.internal/ctxsvc"),
        # What hosting platforms hand out, password escapes and query untouched.
        (
            "postgres://app:p%40ss:w0rd@db.internal:6543/ctxsvc?sslmode=require",
            "postgresql+psycopg://app:p%40ss:w0rd@db.internal:6543/ctxsvc?sslmode=require",
        ),
        ("POSTGRES://app@db/ctxsvc", "postgresql+psycopg://app@db/ctxsvc"),
        ("postgresql+psycopg://app@db/ctxsvc", "postgresql+psycopg://app@db/ctxsvc"),
        ("postgresql+psycopg_async://app@db/ctxsvc", "postgresql+psycopg_async://app@db/ctxsvc"),
        ("  sqlite:///padded.db\n", "sqlite+aiosqlite:///padded.db"),
    ],
)
def test_usual_forms_map_to_the_async_drivers(given: str, used: str) -> None:
    assert async_database_url(given) == used
    assert Settings(database_url=given, _env_file=None).database_url == used


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ("mysql://app@db/ctxsvc", "ctxsvc runs on SQLite or PostgreSQL, not mysql"),
        (
            "postgresql+psycopg2://app@db/ctxsvc",
            "ctxsvc runs PostgreSQL through psycopg, not psycopg2: drop '+psycopg2'",
        ),
        (
            "postgresql+asyncpg://app@db/ctxsvc",
            "ctxsvc runs PostgreSQL through psycopg, not asyncpg: drop '+asyncpg'",
        ),
        (
            "sqlite+pysqlite:///ctxsvc.db",
            "ctxsvc runs SQLite through aiosqlite, not pysqlite: drop '+pysqlite'",
        ),
        ("./data/ctxsvc.db", "it is not a database URL"),
        ("", "it is not a database URL"),
    ],
)
def test_other_forms_are_refused_with_a_reason(given: str, reason: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(reason)}$"):
        async_database_url(given)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://app:s3cret@db/ctxsvc", "postgresql://app:***@db/ctxsvc"),
        ("postgres://app:p@ss@db/ctxsvc", "postgres://app:***@db/ctxsvc"),
        ("postgresql://app@db/ctxsvc", "postgresql://app@db/ctxsvc"),
        ("sqlite:///ctxsvc.db", "sqlite:///ctxsvc.db"),
        ("nonsense://:s3cret@", "nonsense://:***@"),
    ],
)
def test_a_shown_url_never_carries_its_password(url: str, shown: str) -> None:
    assert redacted_url(url) == shown
