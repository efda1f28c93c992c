"""Token buckets: at most ``capacity`` requests at once, refilled at ``capacity / window``
per second, one bucket per key (a tenant). Pure: the caller passes the time.

The buckets live in one process (``docs/security.md``, "Rate limits"): with N processes a tenant
may make up to N times the limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["TokenBuckets"]


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class TokenBuckets:
    def __init__(self, capacity: int, window_seconds: float, *, max_keys: int = 100_000) -> None:
        self.capacity = capacity
        self.rate = capacity / window_seconds  # tokens per second
        self._buckets: dict[str, _Bucket] = {}
        self._max_keys = max_keys

    def take(self, key: str, now: float) -> int | None:
        """Take one token from ``key``'s bucket: ``None`` when there was one, else the whole
        seconds until there will be (a ``Retry-After``, at least 1)."""
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= self._max_keys:
                self._forget_full(now)
            bucket = self._buckets[key] = _Bucket(float(self.capacity), now)
        elapsed = max(0.0, now - bucket.at)
        bucket.tokens = min(float(self.capacity), bucket.tokens + elapsed * self.rate)
        bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return None
        return max(1, math.ceil((1.0 - bucket.tokens) / self.rate))

    def _forget_full(self, now: float) -> None:
        # A full bucket holds no information: dropping it changes no answer.
        for key, bucket in list(self._buckets.items()):
            if bucket.tokens + (now - bucket.at) * self.rate >= self.capacity:
                del self._buckets[key]
