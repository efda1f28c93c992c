"""Drop ``turn_plans``: a turn's plan is kept once, in ``turns.plan``.

The table held a copy of what ``turns.plan`` holds (both were written by the same ``update_plan``
step), which cost the turn loop one more statement per plan update. Nothing is lost: every row's
plan is on its turn. The downgrade recreates the table from ``turns.plan``.

Revision ID: 2026_11_30_1400
Revises: 2026_11_30_1300
Create Date: 2026-11-30 14:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "2026_11_30_1400"
down_revision: str | None = "2026_11_30_1300"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_table("turn_plans")


def downgrade() -> None:
    op.create_table(
        "turn_plans",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("turn_id", sa.Text(), nullable=False),
        sa.Column("plan", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id", "turn_id"],
            ["turns.session_id", "turns.turn_id"],
            name=op.f("fk_turn_plans_session_id_turn_id_turns"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "turn_id", name=op.f("pk_turn_plans")),
    )
    op.execute(
        "INSERT INTO turn_plans (session_id, turn_id, plan, updated_at) "
        "SELECT session_id, turn_id, plan, updated_at FROM turns WHERE plan IS NOT NULL"
    )
