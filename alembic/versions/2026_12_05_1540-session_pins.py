"""Pins: tables ``session_pins`` and ``pin_proposals``, session column ``pin_count``.

A session's pins (``app.core.pins``): facts, constraints and decisions sent in every request
as the World State section ``session/pins``; ``pin_proposals`` holds the constraints the service
recognized in user messages until the caller accepts or dismisses them. ``sessions.pin_count``
counts a session's pins so that a model call of a session without any reads nothing more
(``app.storage.models.session``). Fresh tables: nothing to backfill, every count starts at 0.

``session_id`` leads every primary key and unique constraint (the schema distributes by
session: ``tests/storage/test_distribution.py``). Plain ``add_column``/``drop_column`` for the
reason given in ``2026_11_30_1300``.

Revision ID: 2026_12_05_1540
Revises: 2026_12_05_1530
Create Date: 2026-12-05 15:40:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "2026_12_05_1540"
down_revision: str | None = "2026_12_05_1530"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _session_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["session_id"],
        ["sessions.id"],
        name=op.f(f"fk_{table}_session_id_sessions"),
        ondelete="CASCADE",
    )


def upgrade() -> None:
    op.create_table(
        "session_pins",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("pin_id", sa.Text(), nullable=False),
        sa.Column("position", sa.BigInteger(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("proposal_id", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "kind IN ('constraint', 'decision', 'fact')", name=op.f("ck_session_pins_kind_valid")
        ),
        sa.CheckConstraint("position > 0", name=op.f("ck_session_pins_position_positive")),
        _session_fk("session_pins"),
        sa.PrimaryKeyConstraint("session_id", "pin_id", name=op.f("pk_session_pins")),
        sa.UniqueConstraint(
            "session_id", "position", name=op.f("uq_session_pins_session_id_position")
        ),
    )
    op.create_table(
        "pin_proposals",
        sa.Column("session_id", sa.Text(), nullable=False),
        sa.Column("proposal_id", sa.Text(), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("text_key", sa.String(length=64), nullable=False),
        sa.Column("message_id", sa.Text(), nullable=False),
        sa.Column("message_sequence", sa.BigInteger(), nullable=False),
        sa.Column("ordinal", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("pin_id", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status IN ('open', 'accepted', 'dismissed')",
            name=op.f("ck_pin_proposals_status_valid"),
        ),
        _session_fk("pin_proposals"),
        sa.PrimaryKeyConstraint("session_id", "proposal_id", name=op.f("pk_pin_proposals")),
        sa.UniqueConstraint(
            "session_id", "text_key", name=op.f("uq_pin_proposals_session_id_text_key")
        ),
    )
    op.add_column(
        "sessions", sa.Column("pin_count", sa.BigInteger(), server_default="0", nullable=False)
    )


def downgrade() -> None:
    op.drop_column("sessions", "pin_count")
    op.drop_table("pin_proposals")
    op.drop_table("session_pins")
