"""Declarative base, metadata naming convention and the column types every table shares.

The naming convention gives every constraint and index a deterministic name, so that a name
produced by SQLite matches the one produced by PostgreSQL and migrations can address constraints
by name on both (Alembic "The Importance of Naming Constraints"). Every name stays below
PostgreSQL's 63-character identifier limit: a longer one would be silently truncated on one
backend only.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import JSON, DateTime, Dialect, MetaData
from sqlalchemy.orm import DeclarativeBase
from sqlalchemy.types import TypeDecorator

from app import fastjson

__all__ = [
    "NAMING_CONVENTION",
    "Base",
    "JSONValue",
    "UTCDateTime",
    "dumps_json",
    "loads_json",
    "utc_now",
]

NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utc_now() -> datetime:
    return datetime.now(UTC)


def dumps_json(value: Any) -> str:
    """Compact JSON with non-ASCII kept as itself: smaller rows, same text as spec §3.1 measures
    (orjson's bytes, ``app.fastjson.spec_bytes``; a list of content blocks is not searched for
    floats where its blocks' schema has none, ``content_bytes``: the same bytes)."""
    if type(value) is list:
        return fastjson.content_bytes(value).decode("utf-8")
    return fastjson.spec_bytes(value).decode("utf-8")


def loads_json(text: str | bytes) -> Any:
    """A stored JSON column's value (pydantic-core's reader, ``app.fastjson.loads``)."""
    return fastjson.loads(text)


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on both backends.

    PostgreSQL stores ``timestamptz``; SQLite has no time zone, so the value is stored as naive UTC
    and given back its UTC zone on load. Naive datetimes are refused on the way in: their zone is
    unknowable, and guessing is how the original runtime ended up with local wall-clock times.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column; pass an aware datetime")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# Plain JSON (not JSONB) on PostgreSQL on purpose: JSONB re-orders object keys and drops
# duplicates, while message content must round-trip byte for byte (the field order of spec §1 is
# the basis of estimates, provider_opaque payloads are echoed verbatim, and the key order of a
# tool's input_schema is part of what the model sees). ``none_as_null`` makes Python ``None`` an
# SQL NULL rather than the JSON literal ``null``.
JSONValue = JSON(none_as_null=True)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {
        datetime: UTCDateTime(),
        dict[str, Any]: JSONValue,
    }
