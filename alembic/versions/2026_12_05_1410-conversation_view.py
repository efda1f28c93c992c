"""``sessions.conversation_view``: the messages a client took back and the epoch it started.

Taking back the last message and starting a new epoch hide stored messages from the active
Conversation without deleting them (``app.core.conversation_view``). NULL (every existing row)
hides nothing.

Revision ID: 2026_12_05_1410
Revises: 2026_12_05_1400
Create Date: 2026-12-05 14:10:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "2026_12_05_1410"
down_revision: str | None = "2026_12_05_1400"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ADD/DROP COLUMN (SQLite ≥ 3.35): a batch copy of ``sessions`` would cascade to every
# session-scoped table on SQLite with foreign keys on.
def upgrade() -> None:
    op.add_column("sessions", sa.Column("conversation_view", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("sessions", "conversation_view")
