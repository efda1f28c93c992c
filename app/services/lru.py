"""A least-recently-used map bounded by the bytes its values hold (every per-process cache of the
service says its bound in bytes: ``docs/performance.md``, "Memory")."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

__all__ = ["BytesLRU"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BytesLRU(Generic[K, V]):
    """At most ``max_bytes`` in all, by the size each ``put`` names; the least recently used
    entries go first, and a value larger than the whole bound is not kept. Not thread-safe:
    the service uses it from its event loop."""

    def __init__(self, max_bytes: int) -> None:
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self.max_bytes = max_bytes
        self.held_bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: K, value: V, size: int) -> None:
        self.discard(key)
        if size > self.max_bytes:
            return
        self._entries[key] = (value, size)
        self.held_bytes += size
        while self.held_bytes > self.max_bytes:
            _, (_, evicted) = self._entries.popitem(last=False)
            self.held_bytes -= evicted

    def discard(self, key: K) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.held_bytes -= entry[1]
