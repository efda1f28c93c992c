"""Turns waiting for tool results get a deadline (``turns.tool_results_deadline``).

A turn that waits for the caller's tool results holds no lease, so nothing ended it when its
caller disappeared: the session answered ``409 busy`` until someone cancelled. The deadline is
set when the turn starts waiting (the session's timeout, else the setting's); past it any
replica ends the turn (``failed``, ``tool_results_timeout``). Indexed with ``status`` for the
sweeper, like the lease expiry.

Turns already waiting get the deadline they would have had with the default timeout (one hour
after they last changed, ``updated_at``): a session left ``busy`` by a caller that disappeared
before the upgrade is freed too. Computed here rather than in SQL, whose date arithmetic and
SQLite's stored timestamp text differ between the backends.

Revision ID: 2026_12_01_1030
Revises: 2026_12_01_1020
Create Date: 2026-12-01 10:30:00+00:00
"""

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.types import TypeDecorator

from alembic import op

revision: str = "2026_12_01_1030"
down_revision: str | None = "2026_12_01_1020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# ``CTXSVC_TOOL_RESULTS_TIMEOUT_SECONDS``' default when this revision was written.
_DEFAULT_TIMEOUT = timedelta(hours=1)


class _UTC(TypeDecorator[datetime]):
    """The service's timestamps: aware UTC, stored naive on SQLite (``app.storage.base``)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


_turns = sa.table(
    "turns",
    sa.column("session_id"),
    sa.column("turn_id"),
    sa.column("status"),
    sa.column("phase"),
    sa.column("updated_at", _UTC()),
    sa.column("tool_results_deadline", _UTC()),
)


def upgrade() -> None:
    op.add_column(
        "turns", sa.Column("tool_results_deadline", sa.DateTime(timezone=True), nullable=True)
    )
    op.create_index(
        "ix_turns_status_tool_results_deadline", "turns", ["status", "tool_results_deadline"]
    )
    bind = op.get_bind()
    waiting = sa.select(_turns.c.session_id, _turns.c.turn_id, _turns.c.updated_at).where(
        _turns.c.status == "running", _turns.c.phase == "waiting_tool_results"
    )
    for session_id, turn_id, updated_at in bind.execute(waiting).all():
        bind.execute(
            sa.update(_turns)
            .where(_turns.c.session_id == session_id, _turns.c.turn_id == turn_id)
            .values(tool_results_deadline=updated_at + _DEFAULT_TIMEOUT)
        )


def downgrade() -> None:
    op.drop_index("ix_turns_status_tool_results_deadline", table_name="turns")
    op.drop_column("turns", "tool_results_deadline")
