"""Where a proxied session's history ends, by digest (spec §21): the compatible endpoints find
the session a provider-shaped request continues without reading any stored message.

One row per end of a caller's history the session stored: after the request's messages were
appended (``length`` = the request's message count) and after the model's answer (one more).
``chain_digest`` digests the session's family (tenant, model, system prompt, tools) and every
caller message up to that end (``app.services.proxy.digests``). ``session_id`` leads the primary
key (the schema distributes by session); the look-up index leads with the tenant and family.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, CheckConstraint, ForeignKey, Index, Text
from sqlalchemy.orm import Mapped, mapped_column

from app.storage.base import Base

__all__ = ["ProxyEnd"]


class ProxyEnd(Base):
    __tablename__ = "proxy_ends"
    __table_args__ = (
        CheckConstraint("length > 0", name="length_positive"),
        Index("ix_proxy_ends_lookup", "tenant_id", "family_digest", "chain_digest"),
    )

    session_id: Mapped[str] = mapped_column(
        Text, ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True
    )
    # How many of the caller's messages this end covers (World State and other messages the
    # service stored in between are not the caller's and are not counted).
    length: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    tenant_id: Mapped[str] = mapped_column(Text)
    family_digest: Mapped[str] = mapped_column(Text)
    chain_digest: Mapped[str] = mapped_column(Text)
