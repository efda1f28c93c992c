"""Turn column ``trace_context``: the W3C ``traceparent`` of the request that started the turn.

With traces on, every leg of a turn (a runner works until the turn ends or waits for the
caller's tool results; the replica that receives the last result runs the next leg) joins that
trace as a child of the stored context, on whichever replica it runs. ``NULL`` when the turn
started with traces off. Plain ``add_column``/``drop_column`` for the reason given in
``2026_11_30_1300``.

Revision ID: 2026_12_01_0900
Revises: 2026_11_30_1500
Create Date: 2026-12-01 09:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "2026_12_01_0900"
down_revision: str | None = "2026_11_30_1500"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("turns", sa.Column("trace_context", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("turns", "trace_context")
