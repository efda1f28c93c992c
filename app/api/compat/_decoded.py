"""The messages a codec decoded from a conversation's last request, for its next one.

An SDK resends the whole history on every call, so a request is usually the last one of its
conversation plus a few messages. A codec whose messages decode one by one (the names of the
tool calls a result answers carried forward) keeps what it decoded, and decodes a request that
extends it only from where the last one ended: the prefix is compared as the JSON the caller
sent (``==`` on parsed values, far cheaper than decoding it), and equal JSON decodes to equal
messages, so the result is the full decoding's. The decoded messages are the very objects of the
last request, which also makes the chain cache's comparison (``app.services.proxy.digests``)
an identity check.

Bounded: the ``size`` conversations used last, holding ``max_messages`` raw messages in all (a
request over that alone is not kept). In-process only: a miss decodes the whole request, as
before this memo. Equal JSON decodes equally whoever sent it, so nothing is told across
tenants by sharing it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from app.services.proxy.contract import ProxyMessage

__all__ = ["Decoded", "DecodedPrefixes"]


@dataclass(frozen=True, slots=True)
class Decoded:
    """A request's raw messages, what they decoded to, and the state decoding ended with."""

    raw: list[Any]
    messages: list[ProxyMessage]
    # Tool call id → tool name, of the calls ``raw`` made (a later result names its call).
    names: dict[str, str]
    # System texts ``raw`` held among its messages (Chat Completions), in order.
    system: tuple[str, ...] = ()


class DecodedPrefixes:
    def __init__(self, size: int = 64, max_messages: int = 50_000) -> None:
        self._size = size
        self._max_messages = max_messages
        self._held = 0
        self._last: OrderedDict[Hashable, Decoded] = OrderedDict()

    def extended(self, key: Hashable, raw: Sequence[Any]) -> Decoded | None:
        """The decoding kept under ``key`` when ``raw`` starts with all of its messages."""
        last = self._last.get(key)
        if last is None or len(last.raw) > len(raw):
            return None
        if raw[: len(last.raw)] != last.raw:
            return None
        return last

    def keep(self, key: Hashable, decoded: Decoded) -> None:
        replaced = self._last.pop(key, None)
        if replaced is not None:
            self._held -= len(replaced.raw)
        if len(decoded.raw) <= self._max_messages:
            self._last[key] = decoded
            self._held += len(decoded.raw)
        while len(self._last) > self._size or self._held > self._max_messages:
            self._held -= len(self._last.popitem(last=False)[1].raw)
