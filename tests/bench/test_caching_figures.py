"""How ``bench/caching.py`` compares the service's ``stable_prefix_tokens`` with the provider's
cache read: the service's uncached tail is scaled to the provider's tokens and placed from the
end of the request; "messages apart" counts the message boundaries strictly between the two."""

from __future__ import annotations

from typing import Any

import pytest

from bench.caching import analyse
from bench.caching_provider import ProviderCall
from bench.caching_session import Driven
from bench.prefix_cache import CacheUsage

ENDS = (100, 1100, 1200, 1700, 1800, 2800)  # tools, system, then four messages


def provider(number: int, read: int, written: int, total: int = 2800) -> ProviderCall:
    usage = CacheUsage(total - read - written, read, written, 0, 2, ENDS)
    return ProviderCall(number, usage, "grep")


def finished(
    call: ProviderCall, stable: int, estimate: int, prefix_break: Any = None
) -> dict[str, Any]:
    """The service's update for ``call``: the usage the provider reported, and its budget."""
    usage = {
        "input_tokens": call.usage.total_tokens,
        "cached_tokens": call.usage.cache_read_input_tokens,
        "cache_creation_tokens": call.usage.cache_creation_input_tokens,
    }
    budget = {
        "stable_prefix_tokens": stable,
        "estimated_input_tokens": estimate,
        "prefix_break": prefix_break,
    }
    return {"type": "model_call_finished", "payload": {"usage": usage, "budget": budget}}


def test_a_service_figure_inside_the_message_the_provider_read_to_is_zero_messages_apart() -> None:
    # The service counts 2 tokens for the provider's 1: a tail of 2000 is 1000 provider tokens,
    # placed at 2800 − 1000 = 1800, exactly where the provider's read ends.
    calls = [provider(1, 0, 1800), provider(2, 1800, 0)]
    driven = Driven(updates=[finished(calls[0], 0, 5600), finished(calls[1], 3600, 5600)])
    figures = analyse(calls, driven)
    assert figures.service_figures
    assert figures.usage_matches
    second = figures.per_call[1]
    assert (second.tokens_apart, second.messages_apart) == (0, 0)
    assert figures.within_one_message


def test_a_service_figure_two_boundaries_away_is_not_within_one_message() -> None:
    brk = {"index": 2, "reason": "pruning"}
    calls = [provider(1, 0, 2800), provider(2, 1100, 1700)]  # the provider read tools + system
    driven = Driven(updates=[finished(calls[0], 0, 2800), finished(calls[1], 1750, 2800, brk)])
    figures = analyse(calls, driven)
    second = figures.per_call[1]
    assert second.prefix_break == brk
    assert second.provider_break  # it read less than the first call wrote
    assert second.tokens_apart == 650
    assert second.messages_apart == 2  # 1200 and 1700 lie between 1100 and 1750
    assert figures.within_one_message is False
    assert figures.max_messages_apart == 2


def test_without_the_service_figures_only_the_provider_side_is_reported() -> None:
    calls = [provider(1, 0, 2800), provider(2, 2800, 0)]
    figures = analyse(calls, Driven())
    assert not figures.service_figures
    assert figures.usage_matches is None
    assert figures.within_one_message is None
    assert figures.cache_read_share == pytest.approx(2800 / 5600)
    assert figures.relative_cost == pytest.approx((0.1 * 2800 + 1.25 * 2800) / 5600)
