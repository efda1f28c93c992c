"""Per-tenant rate limits (``CTXSVC_RATE_LIMIT_*``): the limit'th request passes, the next
answers 429 ``tenant_rate_limited`` with ``Retry-After``; other tenants keep their own budget."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from app.core.limits.rates import TokenBuckets
from tests.conftest import client_for, make_settings
from tests.tenancy.conftest import ADMIN, ADMIN_KEY, bearer, fresh, issue_key

pytestmark = pytest.mark.anyio

LIMIT = 5
# One request back every 720 s: none comes back while the test runs.
WINDOW = 3600.0


@pytest.fixture
async def limited(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(
        database_url,
        api_keys=[ADMIN_KEY],
        rate_limit_requests=LIMIT,
        rate_limit_window_seconds=WINDOW,
    )
    async for client in client_for(settings):
        yield client


async def test_the_limit_is_per_tenant_and_says_when_to_retry(
    limited: httpx.AsyncClient,
) -> None:
    a = bearer((await issue_key(limited, fresh("tenant-a")))["key"])  # the admin's 1st request
    b = bearer((await issue_key(limited, fresh("tenant-b")))["key"])  # the admin's 2nd
    for _ in range(LIMIT):
        assert (await limited.get("/v1/sessions", headers=a)).status_code == 200
    over = await limited.get("/v1/sessions", headers=a)
    assert over.status_code == 429
    assert over.json()["code"] == "tenant_rate_limited"
    assert int(over.headers["retry-after"]) == WINDOW / LIMIT
    assert over.headers["content-type"].startswith("application/problem+json")
    # Tenant B and the admin's own tenant are untouched by A's use.
    assert (await limited.get("/v1/sessions", headers=b)).status_code == 200
    assert (await limited.get("/v1/admin/keys", headers=ADMIN)).status_code == 200
    # Health stays open to probes, and scrapes take nothing from the admin tenant's budget.
    assert (await limited.get("/healthz")).status_code == 200
    for _ in range(LIMIT + 1):
        assert (await limited.get("/metrics", headers=ADMIN)).status_code == 200
    assert (await limited.get("/v1/admin/keys", headers=ADMIN)).status_code == 200
    assert (await limited.get("/metrics")).status_code == 401


def test_buckets_refill_at_the_rate() -> None:
    buckets = TokenBuckets(2, 10.0)
    assert buckets.take("t", 0.0) is None
    assert buckets.take("t", 0.0) is None
    assert buckets.take("t", 0.0) == 5  # one token every 5 s
    assert buckets.take("t", 4.0) == 1
    assert buckets.take("t", 5.0) is None
    assert buckets.take("t", 5.0) == 5
    assert buckets.take("t", 100.0) is None  # full again, never more than the capacity
    assert buckets.take("t", 100.0) is None
    assert buckets.take("t", 100.0) == 5
