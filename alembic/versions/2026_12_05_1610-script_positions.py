"""Scripted models: a position per session (table ``script_positions``).

A ``scripted`` model's script was consumed by one position shared by every session using the
model: a second session found it spent. Each session now takes the entries from the first on
(``ModelRepository.take_script_entry``); ``models.script_position`` stays as the count of calls
since the last ``PUT``. Fresh table: nothing to backfill (sessions in flight start their script
again, which only tests and demos use).

``session_id`` leads the primary key (the schema distributes by session).

Revision ID: 2026_12_05_1610
Revises: 2026_12_05_1600
Create Date: 2026-12-05 16:10:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "2026_12_05_1610"
down_revision: str | None = "2026_12_05_1600"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "script_positions",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("model_id", sa.Text(), nullable=False),
        sa.Column("taken", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("taken > 0", name=op.f("ck_script_positions_taken_positive")),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_script_positions_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "model_id", name=op.f("pk_script_positions")),
    )


def downgrade() -> None:
    op.drop_table("script_positions")
