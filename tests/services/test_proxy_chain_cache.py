"""The proxy's chain cache gives the chain a full keying gives, whatever the previous request."""

from __future__ import annotations

from app.services.proxy.contract import ProxyMessage
from app.services.proxy.digests import ChainCache, chain_digests, family_digest, message_key

FAMILY = family_digest("tenant", "model", "system", [])
OTHER = family_digest("tenant", "model", "another system", [])


def _text(role: str, text: str) -> ProxyMessage:
    return ProxyMessage(role, [{"type": "text", "text": text}])  # type: ignore[arg-type]


def _full(family: str, messages: list[ProxyMessage]) -> list[str]:
    return chain_digests(family, [message_key(m.role, m.content) for m in messages])


HISTORY = [_text("user" if i % 2 == 0 else "assistant", f"message {i}") for i in range(9)]


def test_a_request_that_extends_the_last_one_gets_the_full_chain() -> None:
    cache = ChainCache()
    assert cache.chain(FAMILY, HISTORY[:5]) == _full(FAMILY, HISTORY[:5])
    assert cache.chain(FAMILY, HISTORY) == _full(FAMILY, HISTORY)


def test_an_edited_shorter_or_empty_history_gets_its_own_chain() -> None:
    cache = ChainCache()
    cache.chain(FAMILY, HISTORY)
    edited = [*HISTORY[:3], _text("assistant", "edited"), *HISTORY[4:]]
    assert cache.chain(FAMILY, edited) == _full(FAMILY, edited)
    assert cache.chain(FAMILY, HISTORY[:2]) == _full(FAMILY, HISTORY[:2])
    assert cache.chain(FAMILY, []) == []
    assert cache.chain(FAMILY, HISTORY) == _full(FAMILY, HISTORY)


def test_families_do_not_share_chains_and_the_oldest_is_forgotten() -> None:
    cache = ChainCache(size=1)
    cache.chain(FAMILY, HISTORY)
    assert cache.chain(OTHER, HISTORY) == _full(OTHER, HISTORY)
    assert cache.chain(FAMILY, HISTORY) == _full(FAMILY, HISTORY)
    assert len(cache._last) == 1


def test_the_messages_held_are_bounded_and_a_request_over_the_bound_is_not_kept() -> None:
    cache = ChainCache(max_messages=len(HISTORY))
    # Equal to the bound: kept.
    assert cache.chain(FAMILY, HISTORY) == _full(FAMILY, HISTORY)
    assert list(cache._last) == [FAMILY]
    # One more message held in all: the oldest family goes.
    assert cache.chain(OTHER, HISTORY[:1]) == _full(OTHER, HISTORY[:1])
    assert list(cache._last) == [OTHER]
    # One over the bound alone: answered, not kept (and the family's older entry is gone).
    longer = [*HISTORY, _text("user", "one more")]
    assert cache.chain(OTHER, longer) == _full(OTHER, longer)
    assert list(cache._last) == []
    assert cache._held == 0
