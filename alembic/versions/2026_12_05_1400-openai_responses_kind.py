"""A registered model may speak the OpenAI Responses protocol: provider kind ``openai_responses``.

Only the CHECK constraint on ``models.provider_kind`` changes; no row does (every stored kind
stays valid). On SQLite the constraint is replaced by Alembic's batch mode (a copy of the table):
``models`` is a global table that no foreign key references, so the copy cascades nowhere.

Revision ID: 2026_12_05_1400
Revises: 2026_12_02_1100
Create Date: 2026-12-05 14:00:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "2026_12_05_1400"
down_revision: str | None = "2026_12_02_1100"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_CHECK = "provider_kind_valid"
_BEFORE = "provider_kind IN ('openai_chat', 'anthropic_messages', 'scripted', 'local')"
_AFTER = (
    "provider_kind IN "
    "('openai_chat', 'anthropic_messages', 'openai_responses', 'scripted', 'local')"
)


def _replace_check(sql: str) -> None:
    with op.batch_alter_table("models") as batch:
        batch.drop_constraint(op.f(f"ck_models_{_CHECK}"), type_="check")
        batch.create_check_constraint(_CHECK, sql)


def upgrade() -> None:
    _replace_check(_AFTER)


def downgrade() -> None:
    # A model registered with the new kind cannot be kept under the old rule.
    op.execute("DELETE FROM models WHERE provider_kind = 'openai_responses'")
    _replace_check(_BEFORE)
