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
from app.providers.encoding.memos import MessageMemo as _Memo
from app.providers.encoding.memos import OwnedMemo
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


_openai_memo = _Memo(MEMO_BYTES // 2)
_anthropic_memo = _Memo(MEMO_BYTES // 2)
# Only a process that calls Responses models fills these.
_responses_memo = _Memo(MEMO_BYTES // 2)


# The memo of the owner whose request this task encodes (``owned_by``), else the shared ones.
_OWNER: ContextVar[OwnedMemo | None] = ContextVar("wire_owner", default=None)
_CHAT, _RESPONSES, _ANTHROPIC = 0, 1, 2


def owned_by(memo: OwnedMemo | None) -> Token[OwnedMemo | None]:
    """Encode the messages of the requests this task (and the tasks it starts from now on)
    sends with ``memo``; the bytes are the same either way, only where they are kept moves."""
    return _OWNER.set(memo)


def _pieces(
    protocol: int,
    shared: _Memo,
    messages: Sequence[Mapping[str, Any]],
    build: Callable[[Mapping[str, Any]], T],
    size: Callable[[T], int],
) -> list[T]:
    """Every message's JSON, from the owner's memo, else from the shared memo: either takes a
    previous call's pieces at once where the messages continue it."""
    owner = _OWNER.get()
    if owner is None:
        return shared.pieces(messages, build, size)
    return owner.pieces(protocol, messages, build, size)


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
    pieces = _pieces(_CHAT, _openai_memo, messages, _chat_json, len)
    rest = encode_openai_chat(
        {**request, "messages": []}, model=model, stream=stream, caching=caching
    )
    return _joined(rest, pieces) or dumps(
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
    # A message may encode to no items at all: it adds nothing.
    pieces = [p for p in _pieces(_RESPONSES, _responses_memo, messages, _items_json, len) if p]
    options: dict[str, Any] = {
        "model": model,
        "stream": stream,
        "caching": caching,
        "reasoning": reasoning,
    }
    rest = encode_openai_responses({**request, "messages": []}, **options)
    return _joined(rest, pieces, key="input") or dumps(encode_openai_responses(request, **options))


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
    # A system message's turn is encoded too but not sent (cheap: a few a conversation).
    known = _pieces(_ANTHROPIC, _anthropic_memo, messages, _anthropic_turn, _turn_size)
    for index, message in enumerate(messages):
        if message["role"] == "system":  # part of the rest: the top-level ``system``
            continue
        if index in marked:
            role, blocks = _marked_turn(message)
        else:
            role, blocks = known[index]
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
    encoded = [_TURN_OPEN[role] + b",".join(blocks) + b"]}" for role, blocks in turns]
    return _joined(rest, encoded) or dumps(
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


def _joined(rest: dict[str, Any], pieces: list[bytes], *, key: str = "messages") -> bytes | None:
    """``rest`` (the body but its messages) serialized, with the JSON array of ``pieces`` in
    place of its ``key``; ``None`` if the placeholder is not found exactly once (text holding
    it: then the caller serializes the whole body).

    One join makes the body: the head and the tail ride on the first and last pieces. Joining
    the array first and then replacing the placeholder copied megabytes three more times, each
    into fresh memory (18 ms against 0.14 ms for a 4 MB body)."""
    rest[key] = _SENTINEL
    serialized = dumps(rest)
    if serialized.count(_DUMPED_SENTINEL) != 1:
        return None
    head, tail = serialized.split(_DUMPED_SENTINEL)
    if not pieces:
        return head + b"[]" + tail
    edged = pieces[:]
    edged[0] = head + b"[" + edged[0]
    edged[-1] = edged[-1] + b"]" + tail
    return b",".join(edged)
