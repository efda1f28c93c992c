"""Who is calling: the tenant a request acts for and whether it may administer the service.

Every session and every registered model belongs to one tenant, the tenant of the key that made
it (``docs/security.md``). The keys of ``CTXSVC_API_KEYS`` and an open service (no keys
configured) act for ``DEFAULT_TENANT`` with the admin scope, which is exactly what every caller
could do before tenants existed. Shared models, which every tenant sees, are stored under
``SHARED_TENANT``, a value no tenant id can take (``TENANT_ID_PATTERN``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DEFAULT_TENANT",
    "OPEN_PRINCIPAL",
    "SHARED_TENANT",
    "TENANT_ID_PATTERN",
    "KeyScope",
    "Principal",
    "is_tenant_id",
]

DEFAULT_TENANT = "default"
# Starts with a character the pattern below refuses: never the id of a tenant.
SHARED_TENANT = "*"
TENANT_ID_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"
_TENANT_ID = re.compile(TENANT_ID_PATTERN)

KeyScope = Literal["tenant", "admin"]


def is_tenant_id(value: str) -> bool:
    return _TENANT_ID.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class Principal:
    """The caller of one request. ``key_id``: the stored key it presented (``None``: a
    configured key or an open service)."""

    tenant_id: str
    admin: bool
    key_id: str | None = None


OPEN_PRINCIPAL = Principal(DEFAULT_TENANT, admin=True)
