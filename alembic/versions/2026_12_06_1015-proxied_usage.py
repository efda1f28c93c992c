"""Session columns ``proxied_*``: the compatible endpoints' calls and their reported usage.

A proxied call (spec §21) has no turn whose usage columns could hold what its provider
reported, so the session counts its proxied calls and sums their input, output, cached-read,
cache-write and reasoning tokens itself. Fresh columns, 0 for every existing session: calls
made before this revision were not counted and cannot be recovered.

Plain ``add_column``/``drop_column`` for the reason given in ``2026_11_30_1300``.

Revision ID: 2026_12_06_1015
Revises: 2026_12_05_1730
Create Date: 2026-12-06 10:15:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "2026_12_06_1015"
down_revision: str | None = "2026_12_05_1730"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_COLUMNS = (
    "proxied_calls",
    "proxied_input_tokens",
    "proxied_output_tokens",
    "proxied_cached_tokens",
    "proxied_cache_creation_tokens",
    "proxied_reasoning_tokens",
)


def upgrade() -> None:
    for name in _COLUMNS:
        op.add_column(
            "sessions",
            sa.Column(name, sa.BigInteger(), nullable=False, server_default="0"),
        )


def downgrade() -> None:
    for name in reversed(_COLUMNS):
        op.drop_column("sessions", name)
