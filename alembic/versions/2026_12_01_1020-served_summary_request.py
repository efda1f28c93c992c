"""Sessions remember the last bring-your-own-model summary request they served.

``GET .../compactions/request`` records what the request covers (its last message,
``summary_request_through_sequence``) and the checkpoint it was built on
(``summary_request_compaction_id``). A summary posted without naming what it covers is installed
over exactly that, and only while nothing was appended since; before, it was installed over every
message stored by then, and the newer ones left the active conversation unsummarized.

Both columns are NULL for existing sessions (no request served yet). Plain ``add_column`` /
``drop_column`` for the reason given in ``2026_11_30_1300``.

Revision ID: 2026_12_01_1020
Revises: 2026_12_01_1010
Create Date: 2026-12-01 10:20:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "2026_12_01_1020"
down_revision: str | None = "2026_12_01_1010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "sessions", sa.Column("summary_request_through_sequence", sa.BigInteger(), nullable=True)
    )
    op.add_column("sessions", sa.Column("summary_request_compaction_id", sa.Text(), nullable=True))


def downgrade() -> None:
    op.drop_column("sessions", "summary_request_compaction_id")
    op.drop_column("sessions", "summary_request_through_sequence")
