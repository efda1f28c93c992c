"""What every repository shares: the ``AsyncSession`` of the caller's unit of work.

Repositories hold all the queries (STYLE habit 4). They ``flush()`` at most and never commit or
roll back: the caller's unit of work owns the transaction (STYLE habit 3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from app.storage.database import transaction_values

__all__ = ["Repository"]

_T = TypeVar("_T")


class Repository:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    @property
    def dialect_name(self) -> str:
        return self.session.get_bind().dialect.name

    def _insert(self, table: Any) -> postgresql.Insert | sqlite.Insert:
        """An INSERT with ``on_conflict_*`` for the bound backend (both spell it the same way)."""
        if self.dialect_name == "postgresql":
            return postgresql.insert(table)
        return sqlite.insert(table)

    def _per_transaction(self, key: str, factory: Callable[[], _T]) -> _T:
        """A value kept under ``key`` for the current transaction (``transaction_values``):
        emptied when it ends or a savepoint ends; forgetting it only costs a query."""
        values = transaction_values(self.session)
        value: _T | None = values.get(key)
        if value is None:
            value = values[key] = factory()
        return value
