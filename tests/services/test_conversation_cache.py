"""The per-process cache of sessions' last Conversation reads (``ConversationCache``), bounded by
the stored JSON bytes it holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

from app.services.conversation import ActiveConversation
from app.services.conversation_cache import ConversationCache
from app.services.tokens import CountedConversation
from app.storage.models import AgentSession
from app.storage.repositories.records import StoredMessage

CREATED = datetime(2026, 11, 30, tzinfo=UTC)


def _session(session_id: str, created_at: datetime = CREATED) -> AgentSession:
    return AgentSession(id=session_id, created_at=created_at)


def _read(size: int, messages: int = 4) -> CountedConversation:
    # Only the stored JSON size of the messages matters to the cache.
    sizes = [size // messages] * messages
    sizes[-1] += size - sum(sizes)
    stored = cast(list[StoredMessage], [cast(Any, SimpleNamespace(content_bytes=b)) for b in sizes])
    return CountedConversation(ActiveConversation([], None, stored))


def test_a_read_is_found_for_the_same_session_row_and_counter() -> None:
    cache = ConversationCache(max_bytes=100)
    read = _read(10)
    cache.put(_session("s1"), "o200k_base", read)
    assert cache.get(_session("s1"), "o200k_base") is read
    assert cache.get(_session("s1"), "estimate") is None
    # A session deleted and created again with the same id is another session.
    assert cache.get(_session("s1", CREATED + timedelta(seconds=1)), "o200k_base") is None
    assert cache.get(_session("s2"), "o200k_base") is None


def test_least_recently_used_sessions_go_first_beyond_the_byte_budget() -> None:
    cache = ConversationCache(max_bytes=100)
    cache.put(_session("s1"), "estimate", _read(40))
    cache.put(_session("s2"), "estimate", _read(40))
    assert cache.get(_session("s1"), "estimate") is not None  # s1 is now the most recent
    cache.put(_session("s3"), "estimate", _read(20))  # exactly at the budget: all kept
    assert all(cache.get(_session(s), "estimate") is not None for s in ("s1", "s2", "s3"))
    cache.put(_session("s4"), "estimate", _read(1))  # one over: the oldest use (s1) goes
    assert cache.get(_session("s1"), "estimate") is None
    assert all(cache.get(_session(s), "estimate") is not None for s in ("s2", "s3", "s4"))


def test_a_read_larger_than_the_budget_is_not_kept_and_replaces_the_older_one() -> None:
    cache = ConversationCache(max_bytes=100)
    cache.put(_session("s1"), "estimate", _read(10))
    cache.put(_session("s1"), "estimate", _read(101))
    assert cache.get(_session("s1"), "estimate") is None
    # The budget counts only what is held: the dropped read freed its share.
    cache.put(_session("s2"), "estimate", _read(100))
    assert cache.get(_session("s2"), "estimate") is not None


def test_a_zero_budget_keeps_nothing() -> None:
    cache = ConversationCache(max_bytes=0)
    cache.put(_session("s1"), "estimate", _read(1))
    assert cache.get(_session("s1"), "estimate") is None


def test_a_read_that_extends_the_kept_one_is_sized_by_what_it_adds() -> None:
    cache = ConversationCache(max_bytes=100)
    first = _read(40)
    cache.put(_session("s1"), "estimate", first)
    more = cast(list[StoredMessage], [cast(Any, SimpleNamespace(content_bytes=30))])
    extended = CountedConversation(ActiveConversation([], None, [*first.active.stored, *more]))
    cache.put(_session("s1"), "estimate", extended)
    assert cache.held_bytes == 70
    cache.put(_session("s2"), "estimate", _read(31))  # 101: the older session goes
    assert cache.get(_session("s1"), "estimate") is None
    assert cache.held_bytes == 31
