"""Table ``session_request_prefixes``: the prefix record of each session's previous request.

What the next request's ``stable_prefix_tokens`` and ``prefix_break`` are measured against on
every replica (spec §10; ``app.core.caching.prefix_record``). One row per session, replaced by each model call
of a turn and each session prepare; deleted with its session. A fresh table: nothing to backfill
(no row is no previous request).

Revision ID: 2026_12_02_1100
Revises: 2026_12_02_1000
Create Date: 2026-12-02 11:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "2026_12_02_1100"
down_revision: str | None = "2026_12_02_1000"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "session_request_prefixes",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("record", sa.LargeBinary(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_session_request_prefixes_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", name=op.f("pk_session_request_prefixes")),
    )


def downgrade() -> None:
    op.drop_table("session_request_prefixes")
