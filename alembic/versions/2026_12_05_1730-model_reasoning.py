"""Model column ``reasoning``: whether the model reasons (``ModelCapabilities.reasoning``).

OpenAI Responses requests ask for the reasoning state back only for a model that reasons
(OpenAI refuses the request otherwise). Rows registered before this revision with kind
``openai_responses`` sent that request at every call, so they keep doing so (true); every other
row gets false, which changes nothing for the other protocols.

Plain ``add_column``/``drop_column`` for the reason given in ``2026_11_30_1300``.

Revision ID: 2026_12_05_1730
Revises: 2026_12_05_1700
Create Date: 2026-12-05 17:30:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "2026_12_05_1730"
down_revision: str | None = "2026_12_05_1700"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "models",
        sa.Column("reasoning", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.execute(
        sa.text(
            "UPDATE models SET reasoning = :yes WHERE provider_kind = 'openai_responses'"
        ).bindparams(yes=True)
    )


def downgrade() -> None:
    op.drop_column("models", "reasoning")
