"""Session summary columns: mailbox_pending, latest_compaction_id, world_state_version.

They let a turn step skip reads that almost never find anything new (see the docstring of
``app.storage.models.session``). Existing rows are backfilled from the tables they summarize.

No ``batch_alter_table``: on SQLite it would rebuild ``sessions``, and dropping the old table
with ``foreign_keys=ON`` (which the service's engine sets, and a pragma cannot be changed inside
the migration's transaction) would cascade-delete every row that references a session. Both
backends can add a NOT NULL column with a constant default and drop a column in place
(SQLite ≥ 3.35), so plain ``add_column``/``drop_column`` suffice.

Revision ID: 2026_11_30_1300
Revises: 2026_11_30_1200
Create Date: 2026-11-30 13:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "2026_11_30_1300"
down_revision: str | None = "2026_11_30_1200"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BACKFILL_COUNTS = """
UPDATE sessions SET
    mailbox_pending = (
        SELECT count(*) FROM agent_messages
        WHERE agent_messages.session_id = sessions.id
          AND agent_messages.delivered_message_sequence IS NULL
    ),
    latest_compaction_id = (
        SELECT conversation_compactions.compaction_id FROM conversation_compactions
        WHERE conversation_compactions.session_id = sessions.id
        ORDER BY conversation_compactions.sequence DESC
        LIMIT 1
    )
"""

# A random token per row (as the app gives new rows): the server default "unknown" would keep the
# sampler from caching those sessions' baselines.
_BACKFILL_VERSION = {
    "sqlite": "UPDATE sessions SET world_state_version = lower(hex(randomblob(16)))",
    "postgresql": (
        "UPDATE sessions SET world_state_version = md5(random()::text || clock_timestamp()::text"
        " || id)"
    ),
}


def upgrade() -> None:
    op.add_column(
        "sessions",
        sa.Column("mailbox_pending", sa.BigInteger(), server_default="0", nullable=False),
    )
    op.add_column("sessions", sa.Column("latest_compaction_id", sa.Text(), nullable=True))
    op.add_column(
        "sessions",
        sa.Column("world_state_version", sa.Text(), server_default="unknown", nullable=False),
    )
    op.execute(_BACKFILL_COUNTS)
    op.execute(_BACKFILL_VERSION[op.get_bind().dialect.name])


def downgrade() -> None:
    op.drop_column("sessions", "world_state_version")
    op.drop_column("sessions", "latest_compaction_id")
    op.drop_column("sessions", "mailbox_pending")
