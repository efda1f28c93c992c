"""This request against the previous one (spec §10): the longest common prefix of their records'
units (``app.core.caching.prefix_record``), its tokens (``stable_prefix_tokens``) and, when the
previous request is not wholly a prefix of this one, where and why they part (``prefix_break``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from app.core.caching.prefix_record import (
    COMPACTION,
    DIGEST_BYTES,
    REWIND,
    REWRITTEN,
    WORLD_STATE,
    RequestRecord,
)
from app.core.pipeline.prepared_call import BreakReason, PrefixBreak, PreparedModelCall

__all__ = ["PrefixComparison", "compare", "with_prefix"]


@dataclass(frozen=True, slots=True)
class PrefixComparison:
    stable_prefix_tokens: int
    prefix_break: PrefixBreak | None
    # How many leading ``request["messages"]`` lie wholly in the stable prefix (the previous
    # request's number when all of it is a prefix of this one, else the break's index);
    # ``None`` with no previous request.
    stable_messages: int | None


def _common_units(a: bytes, b: bytes) -> int:
    """The number of leading digests ``a`` and ``b`` share (a bisection on slice equality)."""
    width = DIGEST_BYTES
    n = min(len(a), len(b)) // width
    if a[: n * width] == b[: n * width]:
        return n
    low, high = 0, n  # the first ``low`` agree, the first ``high`` do not
    while high - low > 1:
        middle = (low + high) // 2
        if a[: middle * width] == b[: middle * width]:
            low = middle
        else:
            high = middle
    return low


def _region(record: RequestRecord, unit: int) -> str | None:
    if unit >= record.units:
        return None
    if unit < record.tool_units:
        return "tools"
    return "system" if unit < record.tool_units + record.system_parts else "conversation"


def _reason(previous: RequestRecord, current: RequestRecord, unit: int) -> BreakReason:
    """Why the two records part at ``unit`` (the first unit that differs or is missing)."""
    regions = (_region(previous, unit), _region(current, unit))
    if "tools" in regions:
        return "tools_changed"
    if "system" in regions:
        return "system_changed"
    if None in regions:  # one request ends there: messages were removed (or never sent)
        return "history_changed"
    before, now = previous.kinds[unit], current.kinds[unit]
    if now == REWIND:  # a rewind reinstalls old history; it summarizes nothing new
        return "history_changed"
    kinds = (before, now)
    if COMPACTION in kinds or REWIND in kinds:
        return "compaction"
    if WORLD_STATE in kinds:
        return "world_state"
    if REWRITTEN in kinds:
        return "pruning"
    return "history_changed"


def compare(
    prepared: PreparedModelCall, current: RequestRecord, previous: RequestRecord | None
) -> PrefixComparison:
    """``current`` (the record of ``prepared``) against the previous request's record.

    The tokens are the current request's own figures, region by region as the budget sums them
    (the Conversation's as ``provenance.token_shares`` shares them), so a prefix that covers the
    whole request is ``estimated_input_tokens`` and one that covers a previous request it
    extends is that request's estimate. No previous request: 0 and no break.
    """
    if previous is None:
        return PrefixComparison(0, None, None)
    matched = _common_units(previous.digests, current.digests)
    tokens = _prefix_tokens(prepared, current, matched)
    if matched == previous.units:
        return PrefixComparison(tokens, None, previous.units - previous.tool_units)
    index = max(matched - current.tool_units, 0)
    return PrefixComparison(tokens, PrefixBreak(index, _reason(previous, current, matched)), index)


def _prefix_tokens(prepared: PreparedModelCall, record: RequestRecord, matched: int) -> int:
    budget = prepared.budget
    if matched == record.units:
        return budget.estimated_input_tokens
    counter = prepared.counter
    tokens = budget.tool_surface_tokens if record.tool_units and matched else 0
    systems = min(max(matched - record.tool_units, 0), record.system_parts)
    if systems == record.system_parts:
        tokens += budget.system_context_tokens
    elif systems:
        parts = prepared.request["messages"][:systems]
        measure = sum(
            counter.frame_message("system", counter.measure_content(p["content"])) for p in parts
        )
        tokens += counter.tokens(measure)
    items = matched - record.tool_units - record.system_parts
    if items > 0:
        # Σ of the first ``items`` shares of ``token_shares`` (the overhead is in the first).
        tokens += counter.tokens(sum(prepared.measures[:items])) + counter.request_overhead_tokens
    return tokens


def with_prefix(
    prepared: PreparedModelCall, record: RequestRecord, comparison: PrefixComparison
) -> PreparedModelCall:
    """``prepared`` carrying its record and the comparison's figures in its budget."""
    budget = replace(
        prepared.budget,
        stable_prefix_tokens=comparison.stable_prefix_tokens,
        prefix_break=comparison.prefix_break,
    )
    return replace(
        prepared,
        budget=budget,
        prefix_record=record.to_bytes(),
        stable_messages=comparison.stable_messages,
    )
