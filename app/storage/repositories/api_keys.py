"""Stored API keys, looked up by digest (``app.storage.models.tenancy``)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select, update

from app.storage.base import utc_now
from app.storage.models import ApiKey
from app.storage.repositories.base import Repository

__all__ = ["ApiKeyRepository"]


class ApiKeyRepository(Repository):
    async def by_digest(self, digest: str) -> ApiKey | None:
        """The live (not revoked) key with that digest."""
        stmt = select(ApiKey).where(ApiKey.digest == digest, ApiKey.revoked_at.is_(None))
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def get(self, key_id: str) -> ApiKey | None:
        return await self.session.get(ApiKey, key_id)

    async def add(self, row: ApiKey) -> ApiKey:
        self.session.add(row)
        await self.session.flush()
        return row

    async def list(self, tenant_id: str | None) -> Sequence[ApiKey]:
        stmt = select(ApiKey).order_by(ApiKey.created_at, ApiKey.id)
        if tenant_id is not None:
            stmt = stmt.where(ApiKey.tenant_id == tenant_id)
        return (await self.session.execute(stmt)).scalars().all()

    async def revoke(self, key_id: str) -> None:
        """Revoke the key now; a key revoked earlier keeps its first revocation time."""
        await self.session.execute(
            update(ApiKey)
            .where(ApiKey.id == key_id, ApiKey.revoked_at.is_(None))
            .values(revoked_at=utc_now())
        )
