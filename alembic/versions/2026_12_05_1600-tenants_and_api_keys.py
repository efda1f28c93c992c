"""Tenants: ``sessions.tenant_id``, ``models`` keyed by ``(tenant_id, id)``, table ``api_keys``.

Every session and registered model belongs to the tenant of the key that made it
(``app.core.tenancy``, ``docs/security.md``). Rows stored before tenants existed belong to the
``default`` tenant, the tenant of the configured keys and of an open service, so a single-key or
no-key set-up sees exactly what it saw before. ``api_keys`` holds keys made through the admin
API as SHA-256 digests.

``sessions`` gets a plain ``add_column`` (no rebuild: see ``2026_11_30_1300``). ``models`` is
rebuilt on SQLite by batch mode to change its primary key: a global table that no foreign key
references, so the copy cascades nowhere (as in ``2026_12_05_1400``). ``api_keys`` is a global
table too (``tests/storage/test_distribution.py``).

Revision ID: 2026_12_05_1600
Revises: 2026_12_05_1540
Create Date: 2026-12-05 16:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "2026_12_05_1600"
down_revision: str | None = "2026_12_05_1540"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "sessions",
        sa.Column("tenant_id", sa.Text(), server_default="default", nullable=False),
    )
    op.create_index(
        op.f("ix_sessions_tenant_id_created_at_id"),
        "sessions",
        ["tenant_id", "created_at", "id"],
    )
    with op.batch_alter_table("models") as batch:
        batch.add_column(
            sa.Column("tenant_id", sa.Text(), server_default="default", nullable=False)
        )
        batch.drop_constraint(op.f("pk_models"), type_="primary")
        batch.create_primary_key(op.f("pk_models"), ["tenant_id", "id"])
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Text(), nullable=False),
        sa.Column("tenant_id", sa.Text(), nullable=False),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("name", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("scope IN ('tenant', 'admin')", name=op.f("ck_api_keys_scope_valid")),
        sa.CheckConstraint("length(digest) = 64", name=op.f("ck_api_keys_digest_is_sha256")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("digest", name=op.f("uq_api_keys_digest")),
    )


def downgrade() -> None:
    op.drop_table("api_keys")
    # Models of other tenants cannot be kept under one namespace.
    op.execute("DELETE FROM models WHERE tenant_id <> 'default'")
    with op.batch_alter_table("models") as batch:
        batch.drop_constraint(op.f("pk_models"), type_="primary")
        batch.create_primary_key(op.f("pk_models"), ["id"])
        batch.drop_column("tenant_id")
    op.drop_index(op.f("ix_sessions_tenant_id_created_at_id"), table_name="sessions")
    op.drop_column("sessions", "tenant_id")
