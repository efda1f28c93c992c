"""Prompt caching: model column ``prompt_caching``, turn column ``cache_creation_tokens``.

``models.prompt_caching`` (``off`` | ``auto``) says whether requests to the model carry cache
breakpoints (``app.core.caching.breakpoints``); models registered before this revision get ``auto``, the
default of a new registration, so their requests start earning cache reads. A value other than
the two is read as ``auto`` (``app.services.models``): there is no CHECK constraint because
SQLite cannot add one to an existing table in place (see below).

``turns.cache_creation_tokens`` sums the input tokens the provider reported as written to its
prompt cache (Anthropic ``cache_creation_input_tokens``), beside ``cached_tokens`` (read from
it); earlier turns start at 0, which is what they were billed for as writes as far as ctxsvc
knew.

Plain ``add_column``/``drop_column`` for the reason given in ``2026_11_30_1300``.

Revision ID: 2026_12_02_1000
Revises: 2026_12_01_1300
Create Date: 2026-12-02 10:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "2026_12_02_1000"
down_revision: str | None = "2026_12_01_1300"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "models",
        sa.Column("prompt_caching", sa.String(length=8), server_default="auto", nullable=False),
    )
    op.add_column(
        "turns",
        sa.Column("cache_creation_tokens", sa.BigInteger(), server_default="0", nullable=False),
    )


def downgrade() -> None:
    op.drop_column("turns", "cache_creation_tokens")
    op.drop_column("models", "prompt_caching")
