"""The per-process cache of session contexts (``ConversationCache``), bounded by the process
memory they are counted as (``process_bytes``: the stored JSON and messages of the reads they
remember, and their memos' encoded JSON)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

from app.core.counting import ESTIMATE, CounterWrapper
from app.services.calibration import CalibratedCounter
from app.services.conversation import ActiveConversation
from app.services.conversation_cache import ConversationCache, process_bytes
from app.services.tokens import CountedConversation
from app.storage.models import AgentSession
from app.storage.repositories.records import StoredMessage

CREATED = datetime(2026, 11, 30, tzinfo=UTC)


def _session(session_id: str, created_at: datetime = CREATED) -> AgentSession:
    return AgentSession(id=session_id, created_at=created_at)


def held(json_bytes: int, messages: int = 4) -> int:
    """What a context remembering ``_read(json_bytes, messages)`` is counted as."""
    return process_bytes(json_bytes, messages, 0)


# Room for reads of 100 bytes of JSON in 4 messages each (``_read``'s).
BUDGET = held(100)


def _read(size: int, messages: int = 4) -> CountedConversation:
    # Only the stored JSON size of the messages matters to the cache.
    sizes = [size // messages] * messages
    sizes[-1] += size - sum(sizes)
    stored = cast(list[StoredMessage], [cast(Any, SimpleNamespace(content_bytes=b)) for b in sizes])
    return CountedConversation(ActiveConversation([], None, stored))


class _Named(CounterWrapper):
    """The estimate under another name (what the cache keys a context by)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        super().__init__(ESTIMATE)
        self._name = name

    @property
    def name(self) -> str:
        return self._name


O200K = _Named("o200k_base")


def put(cache: ConversationCache, session: AgentSession, counter: str, read: Any) -> None:
    """Remember ``read`` in the session's context, as a committed prepare does."""
    named = O200K if counter == O200K.name else ESTIMATE
    cache.context_for(session, named).remember(read)


def test_a_read_is_found_for_the_same_session_row_and_counter() -> None:
    cache = ConversationCache(max_bytes=BUDGET)
    read = _read(10)
    put(cache, _session("s1"), "o200k_base", read)
    assert cache.get(_session("s1"), "o200k_base") is read
    assert cache.get(_session("s1"), "estimate") is None
    # A session deleted and created again with the same id is another session.
    assert cache.get(_session("s1", CREATED + timedelta(seconds=1)), "o200k_base") is None
    assert cache.get(_session("s2"), "o200k_base") is None


def test_least_recently_used_sessions_go_first_beyond_the_byte_budget() -> None:
    cache = ConversationCache(max_bytes=held(40) + held(40) + held(20))
    put(cache, _session("s1"), "estimate", _read(40))
    put(cache, _session("s2"), "estimate", _read(40))
    assert cache.get(_session("s1"), "estimate") is not None  # s1 is now the most recent
    put(cache, _session("s3"), "estimate", _read(20))  # exactly at the budget: all kept
    assert cache.held_bytes == held(40) + held(40) + held(20)
    assert all(cache.get(_session(s), "estimate") is not None for s in ("s1", "s2", "s3"))
    put(cache, _session("s4"), "estimate", _read(1, 1))  # over: the oldest use (s1) goes
    assert cache.get(_session("s1"), "estimate") is None
    assert all(cache.get(_session(s), "estimate") is not None for s in ("s2", "s3", "s4"))


def test_a_read_larger_than_the_budget_is_not_kept_and_replaces_the_older_one() -> None:
    cache = ConversationCache(max_bytes=BUDGET)
    put(cache, _session("s1"), "estimate", _read(10))
    put(cache, _session("s1"), "estimate", _read(101))  # just over the budget
    assert cache.get(_session("s1"), "estimate") is None
    # The budget counts only what is held: the dropped read freed its share.
    put(cache, _session("s2"), "estimate", _read(100))
    assert cache.get(_session("s2"), "estimate") is not None


def test_a_zero_budget_keeps_nothing() -> None:
    cache = ConversationCache(max_bytes=0)
    put(cache, _session("s1"), "estimate", _read(1))
    assert cache.get(_session("s1"), "estimate") is None


def test_a_read_that_extends_the_kept_one_is_sized_by_what_it_adds() -> None:
    cache = ConversationCache(max_bytes=held(70, 5) + held(30))
    first = _read(40)
    put(cache, _session("s1"), "estimate", first)
    more = cast(list[StoredMessage], [cast(Any, SimpleNamespace(content_bytes=30))])
    extended = CountedConversation(ActiveConversation([], None, [*first.active.stored, *more]))
    put(cache, _session("s1"), "estimate", extended)
    assert cache.held_bytes == held(70, 5)
    put(cache, _session("s2"), "estimate", _read(31))  # over the budget: the older one goes
    assert cache.get(_session("s1"), "estimate") is None
    assert cache.held_bytes == held(31)


def test_a_context_is_the_same_object_for_the_same_session_row_and_counter() -> None:
    cache = ConversationCache(max_bytes=BUDGET)
    context = cache.context_for(_session("s1"), ESTIMATE)
    # Nothing remembered yet: nothing is held, and the next caller starts afresh too.
    assert cache.held_bytes == 0
    context.remember(_read(10))
    assert cache.context_for(_session("s1"), ESTIMATE) is context
    assert cache.context_for(_session("s1"), O200K) is not context
    assert (
        cache.context_for(_session("s1", CREATED + timedelta(seconds=1)), ESTIMATE) is not context
    )


def test_a_calibrated_counters_context_is_never_kept() -> None:
    cache = ConversationCache(max_bytes=BUDGET)
    calibrated = CalibratedCounter(ESTIMATE, 1.5)
    context = cache.context_for(_session("s1"), calibrated)
    context.remember(_read(10))
    assert cache.held_bytes == 0
    assert cache.context_for(_session("s1"), calibrated) is not context
