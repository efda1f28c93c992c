"""Storage: SQLAlchemy 2 (async) models, engine and unit of work, repositories, migrations.

Depends on ``app.core`` only (content model, errors, counters); nothing in the core depends on it.
"""

from app.storage.database import (
    READ_ONLY,
    SessionFactory,
    create_engine,
    create_session_factory,
    unit_of_work,
)
from app.storage.migrate import is_at_head, upgrade_to_head

__all__ = [
    "READ_ONLY",
    "SessionFactory",
    "create_engine",
    "create_session_factory",
    "is_at_head",
    "unit_of_work",
    "upgrade_to_head",
]
