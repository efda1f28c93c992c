"""Tenants: who a key acts for, which tenant owns a session, and the admin's key operations
(``docs/security.md``).

Keys made here are 256 random bits shown once; only their SHA-256 digest is stored, so the
table leaks no usable key. The keys of ``CTXSVC_API_KEYS`` are checked by the API layer in
memory first (``app.api.auth``); a request only reaches the table when it presents another key.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime

from app.core.errors import NotFound
from app.core.tenancy import KeyScope, Principal
from app.services.lru import BytesLRU
from app.storage.base import utc_now
from app.storage.database import SessionFactory, unit_of_work
from app.storage.models import ApiKey
from app.storage.repositories.api_keys import ApiKeyRepository
from app.storage.repositories.sessions import SessionRepository, session_not_found

__all__ = ["IssuedKey", "KeyInfo", "KeyService", "key_digest"]

KEY_PREFIX = "ctx_"
_SHOWN_PREFIX = 12  # "ctx_" and 8 random characters: enough to recognize, useless to guess
# Sessions never change tenant and are never re-created under another id: an owner once read
# is true for ever. ~100 bytes an entry.
_OWNER_CACHE_BYTES = 4 * 1024 * 1024


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class KeyInfo:
    id: str
    tenant_id: str
    scope: KeyScope
    name: str | None
    prefix: str
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class IssuedKey:
    """A key just made: ``key`` is the secret, shown this once."""

    info: KeyInfo
    key: str


def _info(row: ApiKey) -> KeyInfo:
    scope: KeyScope = "admin" if row.scope == "admin" else "tenant"
    return KeyInfo(
        row.id, row.tenant_id, scope, row.name, row.prefix, row.created_at, row.revoked_at
    )


def _key_not_found(key_id: str) -> NotFound:
    return NotFound("key_not_found", f"no API key {key_id!r}; GET /v1/admin/keys lists them")


class KeyService:
    def __init__(self, db: SessionFactory) -> None:
        self._db = db
        self._owners: BytesLRU[str, str] = BytesLRU(_OWNER_CACHE_BYTES)

    async def principal_of(self, key: str) -> Principal | None:
        """The caller a stored, unrevoked key stands for; ``None`` for any other key."""
        async with unit_of_work(self._db, read_only=True) as db:
            row = await ApiKeyRepository(db).by_digest(key_digest(key))
        if row is None:
            return None
        return Principal(row.tenant_id, admin=row.scope == "admin", key_id=row.id)

    async def owner_of_session(self, session_id: str) -> str | None:
        """The tenant owning the session (``None``: no such session)."""
        owner = self._owners.get(session_id)
        if owner is not None:
            return owner
        async with unit_of_work(self._db, read_only=True) as db:
            owner = await SessionRepository(db).tenant_of(session_id)
        if owner is not None:
            self._owners.put(session_id, owner, 64 + len(session_id) + len(owner))
        return owner

    async def check_owner(self, tenant_id: str, session_id: str) -> None:
        """Raise 404 ``session_not_found`` when the session belongs to another tenant (a
        session that does not exist is left to the caller's own lookup)."""
        owner = await self.owner_of_session(session_id)
        if owner is not None and owner != tenant_id:
            raise session_not_found(session_id)

    async def create(self, tenant_id: str, scope: KeyScope, name: str | None) -> IssuedKey:
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        row = ApiKey(
            id=f"key-{uuid.uuid4().hex}",
            tenant_id=tenant_id,
            scope=scope,
            digest=key_digest(key),
            prefix=key[:_SHOWN_PREFIX],
            name=name,
            created_at=utc_now(),
            revoked_at=None,
        )
        async with unit_of_work(self._db) as db:
            await ApiKeyRepository(db).add(row)
        return IssuedKey(_info(row), key)

    async def list(self, tenant_id: str | None) -> list[KeyInfo]:
        async with unit_of_work(self._db, read_only=True) as db:
            return [_info(r) for r in await ApiKeyRepository(db).list(tenant_id)]

    async def rotate(self, key_id: str) -> IssuedKey:
        """A new key for the same tenant, scope and name. The old key keeps working until it
        is revoked, so callers can switch without a gap (``docs/security.md``)."""
        async with unit_of_work(self._db, read_only=True) as db:
            row = await ApiKeyRepository(db).get(key_id)
        if row is None or row.revoked_at is not None:
            raise _key_not_found(key_id)
        old = _info(row)
        return await self.create(old.tenant_id, old.scope, old.name)

    async def revoke(self, key_id: str) -> None:
        """From now on the key authenticates nothing. A revoked key is gone as a credential:
        revoking or rotating it again is 404 (it stays listed, with its ``revoked_at``)."""
        async with unit_of_work(self._db) as db:
            repo = ApiKeyRepository(db)
            row = await repo.get(key_id)
            if row is None or row.revoked_at is not None:
                raise _key_not_found(key_id)
            await repo.revoke(key_id)
