"""What every repository shares: the ``AsyncSession`` of the caller's unit of work.

Repositories hold all the queries (STYLE habit 4). They ``flush()`` at most and never commit or
roll back: the caller's unit of work owns the transaction (STYLE habit 3).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Session, SessionTransaction

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
        """A value kept in ``Session.info`` under ``key`` for the current transaction: it is
        emptied at the end of the transaction or of a savepoint (rolling back to a savepoint
        can undo what it describes; forgetting it only costs a query), but not at the end of
        the inner transaction the ORM wraps every flush in."""
        sync = self.session.sync_session
        value: _T | None = sync.info.get(key)
        if value is None:
            value = sync.info[key] = factory()
            clear = value.clear  # type: ignore[attr-defined]

            def on_end(_session: Session, transaction: SessionTransaction) -> None:
                if transaction.parent is None or transaction.nested:
                    clear()

            event.listen(sync, "after_transaction_end", on_end)
        return value
