"""Agent messages get a database-allocated ``sequence``: the mailbox drains in that order.

Before, the drain ordered by ``created_at``, a timestamp from the clock of whichever replica
queued the message; replicas whose clocks disagree could deliver messages out of the order they
were queued in. Existing rows are numbered per session in their old order (``created_at``, then
id), so the order of a queue waiting across the upgrade does not change.

``agent_messages`` is rebuilt on SQLite (``batch_alter_table``: NOT NULL and a unique constraint
need it). That is safe, unlike for ``sessions`` (see ``2026_11_30_1300``): no table references
``agent_messages``, so dropping the old copy cascades to nothing.

Revision ID: 2026_12_01_1000
Revises: 2026_12_01_0900
Create Date: 2026-12-01 10:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "2026_12_01_1000"
down_revision: str | None = "2026_12_01_0900"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Portable on both backends (no window function in an UPDATE): a message's number is how many
# messages of its session sort at or before it.
_BACKFILL = """
UPDATE agent_messages SET sequence = (
    SELECT count(*) FROM agent_messages AS earlier
    WHERE earlier.session_id = agent_messages.session_id
      AND (earlier.created_at < agent_messages.created_at
           OR (earlier.created_at = agent_messages.created_at
               AND earlier.agent_message_id <= agent_messages.agent_message_id))
)
"""


def upgrade() -> None:
    op.add_column("agent_messages", sa.Column("sequence", sa.BigInteger(), nullable=True))
    op.execute(_BACKFILL)
    with op.batch_alter_table("agent_messages") as batch:
        batch.alter_column("sequence", existing_type=sa.BigInteger(), nullable=False)
        batch.create_unique_constraint(
            op.f("uq_agent_messages_session_id_sequence"), ["session_id", "sequence"]
        )
        batch.create_check_constraint(op.f("ck_agent_messages_sequence_positive"), "sequence > 0")
        batch.drop_index("ix_agent_messages_session_id_created_at")


def downgrade() -> None:
    with op.batch_alter_table("agent_messages") as batch:
        batch.create_index("ix_agent_messages_session_id_created_at", ["session_id", "created_at"])
        batch.drop_constraint(op.f("ck_agent_messages_sequence_positive"), type_="check")
        batch.drop_constraint(op.f("uq_agent_messages_session_id_sequence"), type_="unique")
        batch.drop_column("sequence")
