"""Model column ``output_reserve_tokens``: how much of the window a request keeps for the answer.

The output reserve (spec §3.2) is what the budget reserves and the output limit each request
sends; NULL means the default rule (``app.core.capabilities.default_output_reserve``), which is
what models registered before this revision get: their reserve stays their ceiling while it is
modest (at most 32 768 tokens and 40 % of the window) and becomes that bound otherwise.

Plain ``add_column``/``drop_column`` for the reason given in ``2026_11_30_1300``.

Revision ID: 2026_12_05_1530
Revises: 2026_12_05_1410
Create Date: 2026-12-05 15:30:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "2026_12_05_1530"
down_revision: str | None = "2026_12_05_1410"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("models", sa.Column("output_reserve_tokens", sa.Integer(), nullable=True))


def downgrade() -> None:
    op.drop_column("models", "output_reserve_tokens")
