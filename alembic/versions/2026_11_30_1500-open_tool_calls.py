"""Session summary column ``open_tool_calls``: the session's tool calls without a result.

A turn step checks the call ids of a new assistant message against the session's unresolved
calls; when the session row (loaded under its lock) shows none but the step's own, there is
nothing to look up. Kept by ``MessageRepository`` with every append; existing rows are backfilled
from ``tool_calls``. Plain ``add_column``/``drop_column`` for the reason given in
``2026_11_30_1300``.

Revision ID: 2026_11_30_1500
Revises: 2026_11_30_1400
Create Date: 2026-11-30 15:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "2026_11_30_1500"
down_revision: str | None = "2026_11_30_1400"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "sessions",
        sa.Column("open_tool_calls", sa.BigInteger(), server_default="0", nullable=False),
    )
    op.execute(
        "UPDATE sessions SET open_tool_calls = (SELECT count(*) FROM tool_calls "
        "WHERE tool_calls.session_id = sessions.id AND tool_calls.result_sequence IS NULL)"
    )


def downgrade() -> None:
    op.drop_column("sessions", "open_tool_calls")
