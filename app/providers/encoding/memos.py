"""Where the JSON of each message of a body is kept between calls (``encoding.wire`` joins them):
a message's JSON depends only on its role and content, and content is never
changed in place, so it is remembered by the identity of the content object (kept alive by the
entry, so the identity cannot be reused).

``MessageMemo`` is the process's shared memo of one protocol, bounded in bytes; ``OwnedMemo``
belongs to one owner (a session's context), which counts it and drops it. Both take a call's
pieces at once where its messages continue the previous call's (``_continued``)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from itertools import islice
from operator import is_, itemgetter
from typing import Any, TypeVar

__all__ = ["CHAINS", "MessageMemo", "OwnedMemo"]

T = TypeVar("T")
_content = itemgetter("content")
_role = itemgetter("role")
CHAINS = 64  # conversations whose last call's pieces are kept, per protocol


class MessageMemo:
    """What messages encode to, by the identity of their content, for one protocol.

    Dropped oldest first once over ``max_bytes`` (a message still in use is encoded again at
    its next call). Reads take no lock: a lookup is one dict access, and a racing insert can
    only encode a message twice."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._bytes = 0
        # id(content) → (content, role, what it encodes to, its size); the entry keeps the
        # content alive, so its id cannot stand for another object meanwhile. An OrderedDict:
        # dropping its oldest entry is O(1), where ``next(iter(dict))`` after deletions at the
        # front rescans every freed slot (a call at 100 000 messages spent seconds there).
        self._entries: OrderedDict[int, tuple[Any, str, Any, int]] = OrderedDict()
        # id(first content) → the last call's (contents, roles, pieces, their bytes) of the
        # conversation starting there: its next call, the same messages and a few more, takes
        # the pieces in one identity comparison (C speed) instead of a lookup per message
        # (0.2 µs each: 2 ms a call at 10 000 messages, 20 ms at 100 000).
        self._chains: OrderedDict[int, tuple[list[Any], list[str], list[Any], int]]
        self._chains = OrderedDict()
        self._chain_bytes = 0
        self._lock = threading.Lock()

    def get(
        self,
        message: Mapping[str, Any],
        build: Callable[[Mapping[str, Any]], T],
        size: Callable[[T], int],
    ) -> T:
        content = message["content"]
        role = message["role"]
        entry = self._entries.get(id(content))
        if entry is not None and entry[1] == role:
            value: T = entry[2]
            return value
        value = build(message)
        weight = size(value)
        with self._lock:
            replaced = self._entries.pop(id(content), None)
            if replaced is not None:
                self._bytes -= replaced[3]
            self._entries[id(content)] = (content, role, value, weight)
            self._bytes += weight
            while self._bytes > self._max_bytes:
                self._bytes -= self._entries.popitem(last=False)[1][3]
        return value

    def pieces(
        self,
        messages: Sequence[Mapping[str, Any]],
        build: Callable[[Mapping[str, Any]], T],
        size: Callable[[T], int],
    ) -> list[T]:
        """``[get(m, build, size) for m in messages]``, the messages a previous call of the
        same conversation sent (the same content objects, the same roles) taken from it.

        Keeps the last call's pieces of up to ``CHAINS`` conversations, about ``max_bytes`` of
        them at most, or the newest one alone when it is larger (besides the entries: a chain
        can hold pieces the entries dropped; a rebuilt system message's new size is not
        counted)."""
        contents = list(map(_content, messages))
        if not contents:
            return []
        roles = list(map(_role, messages))
        # The leading system messages are built afresh for each call (the prompt): the chain
        # is known by the first message after them, stored once.
        first = next((i for i, role in enumerate(roles) if role != "system"), 0)
        key = id(contents[first])
        chain = self._chains.get(key)
        start, pieces, weight = 0, [], 0
        again = None if chain is None else _continued(chain[0], chain[1], contents, roles)
        if chain is not None and again is not None:
            start, pieces, weight = len(chain[0]), chain[2][:], chain[3]
            for index in again:  # its own memo entry, by its new content
                pieces[index] = self.get(messages[index], build, size)
        added = [self.get(m, build, size) for m in islice(messages, start, None)]
        pieces.extend(added)
        weight += sum(map(size, added))
        with self._lock:
            replaced = self._chains.pop(key, None)
            if replaced is not None:
                self._chain_bytes -= replaced[3]
            self._chains[key] = (contents, roles, pieces, weight)
            self._chain_bytes += weight
            # The newest chain stays even alone over the bound: a conversation larger than the
            # memo (100 000 messages) otherwise evicts its own oldest entries each call and is
            # encoded whole again at every call (a call's body holds as much anyway).
            while len(self._chains) > 1 and (
                self._chain_bytes > self._max_bytes or len(self._chains) > CHAINS
            ):
                self._chain_bytes -= self._chains.popitem(last=False)[1][3]
        return pieces

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
            self._chains.clear()
            self._chain_bytes = 0


class OwnedMemo:
    """What the messages of one owner (a session's context) encode to, kept with the owner and
    dropped with it, so a memo holds what its owner's cache holds: the shared memos above
    held 32 MiB per protocol, fewer than a dozen long sessions in round robin, each of whose
    calls then encoded its whole Conversation again (``docs/performance.md``, "No cliff").

    Unbounded by itself: it keeps the messages of its owner's last request (entries of
    messages no request holds any more are dropped once they outnumber those in use), and its
    owner's cache counts its ``held_bytes``. Reads and inserts are single dict operations; two
    callers racing can only encode a message twice."""

    __slots__ = ("_last", "_protocols", "held_bytes")

    def __init__(self) -> None:
        # Per protocol, id(content) → (content, role, what it encodes to, its size): the entry
        # keeps the content alive, so its id cannot stand for another object meanwhile.
        self._protocols: list[dict[int, tuple[Any, str, Any, int]]] = [{}, {}, {}]
        self.held_bytes = 0
        # Per protocol, the last request's contents, roles and pieces (the same objects as
        # the entries': a few pointers a message besides them, not counted).
        self._last: list[tuple[list[Any], list[str], list[Any]] | None] = [None, None, None]

    def pieces(
        self,
        protocol: int,
        messages: Sequence[Mapping[str, Any]],
        build: Callable[[Mapping[str, Any]], T],
        size: Callable[[T], int],
    ) -> list[T]:
        """``[get(m, build, size) for m in messages]``: where ``messages`` continue the last
        request (the same content objects under the same roles, but for its rebuilt leading
        system messages) its pieces are taken at once, compared in C, and only the rest are
        looked up: a lookup each was ~3 ms a call at 10 000 messages."""
        get = self.getter(protocol, messages)
        contents = list(map(_content, messages))
        roles = list(map(_role, messages))
        start, pieces = 0, []
        last = self._last[protocol]
        if last is not None:
            again = _continued(last[0], last[1], contents, roles)
            if again is not None:
                start, pieces = len(last[0]), last[2][:]
                for index in again:
                    pieces[index] = get(messages[index], build, size)
        pieces.extend(get(m, build, size) for m in islice(messages, start, None))
        self._last[protocol] = (contents, roles, pieces)
        return pieces

    def getter(
        self, protocol: int, messages: Sequence[Mapping[str, Any]]
    ) -> Callable[[Mapping[str, Any], Callable[[Mapping[str, Any]], T], Callable[[T], int]], T]:
        """The lookup for ``messages`` of ``protocol``: first drops, when they outnumber the
        messages, the entries ``messages`` no longer hold (after a compaction, a pruning)."""
        entries = self._protocols[protocol]
        if len(entries) > 2 * len(messages) + 64:
            wanted = {id(m["content"]) for m in messages}
            dropped = sum(entry[3] for key, entry in entries.items() if key not in wanted)
            entries = {key: entry for key, entry in entries.items() if key in wanted}
            self._protocols[protocol] = entries
            self.held_bytes -= dropped

        def get(
            message: Mapping[str, Any],
            build: Callable[[Mapping[str, Any]], T],
            size: Callable[[T], int],
        ) -> T:
            content = message["content"]
            entry = entries.get(id(content))
            if entry is not None and entry[1] == message["role"]:
                found: T = entry[2]
                return found
            value = build(message)
            weight = size(value)
            if entry is not None:
                self.held_bytes -= entry[3]
            entries[id(content)] = (content, message["role"], value, weight)
            self.held_bytes += weight
            return value

        return get


def _continued(
    old_contents: list[Any], old_roles: list[str], contents: list[Any], roles: list[str]
) -> list[int] | None:
    """``None`` unless ``contents`` and ``roles`` continue the old ones: the same roles, the
    same content objects after the leading system messages; else the indexes of the old
    leading system messages whose content is another object (to look up again)."""
    known = len(old_contents)
    if known > len(contents) or old_roles != roles[:known]:
        return None
    first = next((i for i, role in enumerate(roles) if role != "system"), 0)
    same = list(map(is_, old_contents, contents))
    if not all(islice(same, first, None)):
        return None
    return [i for i in range(min(first, known)) if not same[i]]
