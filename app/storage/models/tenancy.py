"""The ``api_keys`` table: keys bound to a tenant, stored as digests (``docs/security.md``).

A key is shown once, when it is made; the table keeps its SHA-256 digest (keys are 256 random
bits, so a plain digest cannot be reversed by guessing, and a lookup is one indexed equality)
and a short prefix that lets an operator recognize a key in a list.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.storage.base import Base, utc_now

__all__ = ["ApiKey"]


class ApiKey(Base):
    __tablename__ = "api_keys"
    __table_args__ = (
        CheckConstraint("scope IN ('tenant', 'admin')", name="scope_valid"),
        CheckConstraint("length(digest) = 64", name="digest_is_sha256"),
    )

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(Text)
    scope: Mapped[str] = mapped_column(String(16))
    # Hex SHA-256 of the key: never the key itself.
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    name: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
    # Set once by a revoke; a revoked key authenticates nothing.
    revoked_at: Mapped[datetime | None] = mapped_column()
