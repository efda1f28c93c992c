"""API keys as the admin API carries them (``docs/security.md``)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from app.api.schemas.fields import RequestModel
from app.core.tenancy import TENANT_ID_PATTERN
from app.services.tenancy import IssuedKey, KeyInfo

__all__ = ["IssuedKeyOut", "KeyIn", "KeyListOut", "KeyOut", "TenantId"]

TenantId = Field(
    pattern=TENANT_ID_PATTERN,
    description="A tenant: lower-case letters, digits, `.`, `_` and `-`, at most 63 characters; "
    "`default` is the tenant of the configured keys (CTXSVC_API_KEYS).",
    examples=["billing-agent"],
)


class KeyIn(RequestModel):
    tenant_id: str = TenantId
    scope: Literal["tenant", "admin"] = Field(
        default="tenant",
        description="`tenant`: the tenant's own sessions and models; `admin`: also keys and "
        "shared models.",
    )
    name: str | None = Field(default=None, min_length=1, max_length=200, examples=["ci runner"])


class KeyOut(BaseModel):
    id: str
    tenant_id: str
    scope: Literal["tenant", "admin"]
    name: str | None
    prefix: str = Field(description="The key's first characters, to recognize it; never all.")
    created_at: datetime
    revoked_at: datetime | None

    @classmethod
    def of(cls, info: KeyInfo) -> KeyOut:
        return cls(
            id=info.id,
            tenant_id=info.tenant_id,
            scope=info.scope,
            name=info.name,
            prefix=info.prefix,
            created_at=info.created_at,
            revoked_at=info.revoked_at,
        )


class IssuedKeyOut(KeyOut):
    key: str = Field(description="The key itself, shown this once: only its digest is stored.")

    @classmethod
    def issued(cls, issued: IssuedKey) -> IssuedKeyOut:
        return cls(**KeyOut.of(issued.info).model_dump(), key=issued.key)


class KeyListOut(BaseModel):
    keys: list[KeyOut]
