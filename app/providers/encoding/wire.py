"""A prepared request as the bytes of its body, each message's JSON remembered across calls.

A turn sends the same conversation again and again, a few messages longer each time; encoding
and serializing all of it for every model call cost 0.4 ms at 200 messages and 13 ms at 5 000.
The JSON of a message depends only on its role and its content, and content is never changed in
place (``app.core.content``, the rule the prepare memo relies on too), so it is remembered by the
identity of the content object (kept alive by the entry, so the identity cannot be reused) and
the body is joined from the pieces. The bytes are exactly ``json.dumps`` of the protocol's
(made by orjson, ``app.fastjson.spec_bytes``)
``encode`` (tests compare them); only the messages go through the memo, the rest of the body is
serialized each time. A cache plan changes the rest (the last tool, the last system block, the
OpenAI key) and the few messages it marks, which are encoded afresh: the memo keeps unmarked
blocks only, so a message marked in one call and not in the next is exact in both.

Where the pieces are kept: with the session context that prepared the request (``OwnedMemo``,
set for the task by ``owned_by``: counted in that context's size and dropped with it), else in
the process's shared memo, at most ``MEMO_BYTES / 2`` of message JSON per protocol, the oldest
entries dropped first. A protocol no model of the process speaks holds nothing. (The joined
JSON of a whole Conversation was remembered too, once: turning it off could not be told apart
from keeping it, ``bench/context_caches.py``, so it went.)
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar, Token
from dataclasses import replace
from typing import Any, TypeVar

from app.core.caching.breakpoints import CachePlan
from app.fastjson import spec_bytes
from app.providers.encoding.anthropic_messages import (
    encode_anthropic_messages,
    marked_blocks,
    message_blocks,
)
from app.providers.encoding.openai_chat import chat_message, encode_openai_chat
from app.providers.encoding.openai_responses import encode_openai_responses, message_items

__all__ = [
    "MEMO_BYTES",
    "OwnedMemo",
    "anthropic_messages_body",
    "dumps",
    "forget",
    "openai_chat_body",
    "openai_responses_body",
    "owned_by",
]

MEMO_BYTES = 64 * 1024 * 1024

# Stands for the messages in the serialized rest of a body. It holds U+0000, which no posted
# text can (``app.api.limits``), so its JSON form should occur nowhere else in a body; should
# it, the body is serialized whole.
_SENTINEL = "\x00messages\x00"

T = TypeVar("T")
Turn = tuple[str, tuple[bytes, ...]]  # a wire role and the JSON of its blocks


def dumps(value: Any) -> bytes:
    """The compact JSON every adapter sends."""
    return spec_bytes(value)


_DUMPED_SENTINEL = dumps(_SENTINEL)


class _Memo:
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

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0


_openai_memo = _Memo(MEMO_BYTES // 2)
_anthropic_memo = _Memo(MEMO_BYTES // 2)
# Only a process that calls Responses models fills these.
_responses_memo = _Memo(MEMO_BYTES // 2)


class OwnedMemo:
    """What the messages of one owner (a session's context) encode to, kept with the owner and
    dropped with it, so a memo holds what its owner's cache holds: the shared memos above
    held 32 MiB per protocol, fewer than a dozen long sessions in round robin, each of whose
    calls then encoded its whole Conversation again (``docs/performance.md``, "No cliff").

    Unbounded by itself: it keeps the messages of its owner's last request (entries of
    messages no request holds any more are dropped once they outnumber those in use), and its
    owner's cache counts its ``held_bytes``. Reads and inserts are single dict operations; two
    callers racing can only encode a message twice."""

    __slots__ = ("_protocols", "held_bytes")

    def __init__(self) -> None:
        # Per protocol, id(content) → (content, role, what it encodes to, its size): the entry
        # keeps the content alive, so its id cannot stand for another object meanwhile.
        self._protocols: list[dict[int, tuple[Any, str, Any, int]]] = [{}, {}, {}]
        self.held_bytes = 0

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


# The memo of the owner whose request this task encodes (``owned_by``), else the shared ones.
_OWNER: ContextVar[OwnedMemo | None] = ContextVar("wire_owner", default=None)
_CHAT, _RESPONSES, _ANTHROPIC = 0, 1, 2


def owned_by(memo: OwnedMemo | None) -> Token[OwnedMemo | None]:
    """Encode the messages of the requests this task (and the tasks it starts from now on)
    sends with ``memo``; the bytes are the same either way, only where they are kept moves."""
    return _OWNER.set(memo)


def _getter(
    protocol: int, shared: _Memo, messages: Sequence[Mapping[str, Any]]
) -> Callable[[Mapping[str, Any], Callable[[Mapping[str, Any]], T], Callable[[T], int]], T]:
    owner = _OWNER.get()
    return shared.get if owner is None else owner.getter(protocol, messages)


def forget() -> None:
    """Drop every remembered message, and encode with the shared memos from here on (tests
    start from an empty memo, whatever an earlier test's context left in this thread)."""
    _OWNER.set(None)
    for memo in (_openai_memo, _anthropic_memo, _responses_memo):
        memo.clear()


def openai_chat_body(
    request: Mapping[str, Any],
    *,
    model: str | None,
    stream: bool,
    caching: CachePlan | None = None,
) -> bytes:
    """``dumps(encode_openai_chat(request, ...))``."""
    messages: Sequence[Mapping[str, Any]] = request["messages"]
    get = _getter(_CHAT, _openai_memo, messages)
    pieces: list[bytes] = [get(m, _chat_json, len) for m in messages]
    rest = encode_openai_chat(
        {**request, "messages": []}, model=model, stream=stream, caching=caching
    )
    return _joined(rest, b"[" + b",".join(pieces) + b"]") or dumps(
        encode_openai_chat(request, model=model, stream=stream, caching=caching)
    )


def openai_responses_body(
    request: Mapping[str, Any],
    *,
    model: str | None,
    stream: bool,
    caching: CachePlan | None = None,
    reasoning: bool = False,
) -> bytes:
    """``dumps(encode_openai_responses(request, ...))``: as ``openai_chat_body``, a message's
    JSON being its input items (none, one or several) joined."""
    messages: Sequence[Mapping[str, Any]] = request["messages"]
    get = _getter(_RESPONSES, _responses_memo, messages)
    # A message may encode to no items at all: it adds nothing.
    pieces = [p for p in [get(m, _items_json, len) for m in messages] if p]
    options: dict[str, Any] = {
        "model": model,
        "stream": stream,
        "caching": caching,
        "reasoning": reasoning,
    }
    rest = encode_openai_responses({**request, "messages": []}, **options)
    return _joined(rest, b"[" + b",".join(pieces) + b"]", key="input") or dumps(
        encode_openai_responses(request, **options)
    )


def anthropic_messages_body(
    request: Mapping[str, Any],
    *,
    model: str | None,
    stream: bool,
    caching: CachePlan | None = None,
) -> bytes:
    """``dumps(encode_anthropic_messages(request, ...))``."""
    messages: Sequence[Mapping[str, Any]] = request["messages"]
    marked = frozenset(caching.message_breakpoints) if caching is not None else frozenset()
    turns: list[tuple[str, list[bytes]]] = []
    get = _getter(_ANTHROPIC, _anthropic_memo, messages)
    for index, message in enumerate(messages):
        if message["role"] == "system":  # part of the rest: the top-level ``system``
            continue
        if index in marked:
            role, blocks = _marked_turn(message)
        else:
            role, blocks = get(message, _anthropic_turn, _turn_size)
        if not blocks:
            continue
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, list(blocks)))
    system = [m for m in messages if m["role"] == "system"]
    # The rest holds the system messages only: the plan's message indexes do not apply there.
    rest_caching = None if caching is None else replace(caching, message_breakpoints=())
    rest = encode_anthropic_messages(
        {**request, "messages": system}, model=model, stream=stream, caching=rest_caching
    )
    encoded = b",".join(_TURN_OPEN[role] + b",".join(blocks) + b"]}" for role, blocks in turns)
    return _joined(rest, b"[" + encoded + b"]") or dumps(
        encode_anthropic_messages(request, model=model, stream=stream, caching=caching)
    )


def _kept(encoded: bytes) -> bytes:
    """``encoded`` in a bytes object of its own size, to be kept: orjson returns its output in
    the buffer it wrote it to, 8 KiB or more however short the JSON, and a memo of 10 000
    messages of ~1.3 KB each held 141 MiB for 13 MB of JSON (``tracemalloc``,
    ``bench/memory_by_cache.py``); the copy costs a memcpy of the JSON once."""
    return bytes(memoryview(encoded))


def _chat_json(message: Mapping[str, Any]) -> bytes:
    return _kept(dumps(chat_message(message)))


def _items_json(message: Mapping[str, Any]) -> bytes:
    return _kept(b",".join(dumps(item) for item in message_items(message)))


# ``dumps({"role": role, "content": [...]})`` up to the first block.
_TURN_OPEN = {role: b'{"role":' + dumps(role) + b',"content":[' for role in ("user", "assistant")}


def _anthropic_turn(message: Mapping[str, Any]) -> Turn:
    role, blocks = message_blocks(message)
    return role, tuple(_kept(dumps(block)) for block in blocks)


def _marked_turn(message: Mapping[str, Any]) -> Turn:
    role, blocks = message_blocks(message)
    return role, tuple(dumps(block) for block in marked_blocks(blocks))


def _turn_size(turn: Turn) -> int:
    return sum(map(len, turn[1]))


def _joined(rest: dict[str, Any], messages: bytes, *, key: str = "messages") -> bytes | None:
    """``rest`` (the body but its messages) serialized, with ``messages`` in their place (the
    ``key`` of the body); ``None`` if the placeholder is not found exactly once (text holding
    it: then the caller serializes the whole body)."""
    rest[key] = _SENTINEL
    serialized = dumps(rest)
    if serialized.count(_DUMPED_SENTINEL) != 1:
        return None
    return serialized.replace(_DUMPED_SENTINEL, messages)
