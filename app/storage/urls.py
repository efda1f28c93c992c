"""The database URL forms people hand ctxsvc, mapped to the async drivers it runs on.

``CTXSVC_DATABASE_URL`` takes what a newcomer or a hosting platform writes — ``sqlite:///x.db``,
``postgresql://…``, ``postgres://…`` — as well as SQLAlchemy's explicit async forms. The service
runs SQLite through ``aiosqlite`` (SQLAlchemy's dialect, adapted by ``sqlite_driver``) and
PostgreSQL through psycopg 3; a URL naming another driver (``psycopg2``, ``asyncpg``) or another
database is refused with a sentence saying what to write instead.
"""

from __future__ import annotations

import re

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

__all__ = ["DATABASE_URL_FORMS", "async_database_url", "redacted_url"]

DATABASE_URL_FORMS = "sqlite:///path/to/ctxsvc.db or postgresql://user:password@host:5432/dbname"

# backend → the async driver the service runs it with, and the other spellings it accepts.
_ASYNC_DRIVER = {"sqlite": "aiosqlite", "postgresql": "psycopg"}
_NAMES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
_ACCEPTED_DRIVERS = {"sqlite": {"", "aiosqlite"}, "postgresql": {"", "psycopg", "psycopg_async"}}
# Heroku, Render, Fly and others hand out ``postgres://``, which SQLAlchemy no longer accepts.
_BACKEND_ALIASES = {"postgres": "postgresql"}

_PASSWORD = re.compile(r"(://[^:/@]*:)[^/]*@")  # to the last @ of the authority


def async_database_url(url: str) -> str:
    """``url`` with the async driver ctxsvc uses for its database; a ``ValueError`` whose message
    says what is wrong when it is not a URL ctxsvc can run on."""
    try:
        parsed = make_url(url.strip())
    except ArgumentError:
        raise ValueError("it is not a database URL") from None
    backend, _, driver = parsed.drivername.lower().partition("+")
    backend = _BACKEND_ALIASES.get(backend, backend)
    accepted = _ACCEPTED_DRIVERS.get(backend)
    if accepted is None:
        raise ValueError(f"ctxsvc runs on SQLite or PostgreSQL, not {backend}")
    if driver not in accepted:
        raise ValueError(
            f"ctxsvc runs {_NAMES[backend]} through {_ASYNC_DRIVER[backend]}, not {driver}: "
            f"drop '+{driver}'"
        )
    if driver:
        return url.strip()  # already an explicit async form
    # Only the scheme changes: the rest stays byte for byte (SQLAlchemy's rendering would
    # re-quote parts of it, e.g. ``:memory:``).
    rest = url.strip().partition("://")[2]
    return f"{backend}+{_ASYNC_DRIVER[backend]}://{rest}"


def redacted_url(url: str) -> str:
    """``url`` fit to print: its password, if any, as ``***`` (works on malformed URLs too)."""
    return _PASSWORD.sub(r"\1***@", url)
