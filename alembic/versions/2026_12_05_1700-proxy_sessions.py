"""Compatible endpoints: a session's origin and fork, and where proxied histories end.

``sessions.origin`` (NULL: made by the sessions API; ``proxy:<protocol>``: by a compatible
endpoint) and ``sessions.forked_from`` (the session a proxied history was forked from). Table
``proxy_ends``: one row per stored end of a caller's history, found by (tenant, family digest,
chain digest) (spec §21). Fresh columns and table: nothing to backfill.

``session_id`` leads the primary key (the schema distributes by session).

Revision ID: 2026_12_05_1700
Revises: 2026_12_05_1610
Create Date: 2026-12-05 17:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "2026_12_05_1700"
down_revision: str | None = "2026_12_05_1610"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain add/drop column (SQLite >= 3.35): a batch would rebuild ``sessions``.
    op.add_column("sessions", sa.Column("origin", sa.Text(), nullable=True))
    op.add_column("sessions", sa.Column("forked_from", sa.Text(), nullable=True))
    op.create_table(
        "proxy_ends",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("length", sa.BigInteger(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("family_digest", sa.Text(), nullable=False),
        sa.Column("chain_digest", sa.Text(), nullable=False),
        sa.CheckConstraint("length > 0", name=op.f("ck_proxy_ends_length_positive")),
        sa.ForeignKeyConstraint(
            ["session_id"],
            ["sessions.id"],
            name=op.f("fk_proxy_ends_session_id_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_id", "length", name=op.f("pk_proxy_ends")),
    )
    op.create_index(
        "ix_proxy_ends_lookup",
        "proxy_ends",
        ["tenant_id", "family_digest", "chain_digest"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_proxy_ends_lookup", table_name="proxy_ends")
    op.drop_table("proxy_ends")
    op.drop_column("sessions", "forked_from")
    op.drop_column("sessions", "origin")
