"""Stage 5: measure the prepared copy and apply the model's limits (spec §3.1, §3.2).

One number serves display and decisions: the estimate of what is actually sent. Each region is
summed in the counter's additive measure and turned into tokens once, so the default estimate is
``ceil(Σ bytes / 4)`` per region. A message's cached measure is reused only while the item is the
very object the caller passed in (no stage rewrote it) and was measured by the same counter, so a
prepare never re-measures unchanged history yet always measures what it sends.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.capabilities import ModelLimits
from app.core.content import Item, content_without_artifacts
from app.core.counting import TokenCounter
from app.core.pipeline.prepared_call import Budget, SystemPart, ToolDefinition

__all__ = ["budget_of", "measure_budget", "message_measures"]


def message_measures(
    items: Sequence[Item], counter: TokenCounter, original_items: Sequence[Item] = ()
) -> list[int]:
    """Each message's measure (before the region's rounding), reusing valid cached figures."""
    reusable = {id(item) for item in original_items if item.cached is not None}
    measures: list[int] = []
    name = counter.name
    for item in items:
        cached = item.cached
        if cached is not None and cached.counter == name and id(item) in reusable:
            measures.append(cached.measure)
        else:
            # What is sent: artifacts are never sent and never counted (spec §1), so a counter
            # is handed the content without them and need not look for them.
            content = content_without_artifacts(item.content)
            measures.append(counter.measure_message(item.role, content))
    return measures


def measure_budget(
    system_context: Sequence[SystemPart],
    items: Sequence[Item],
    tools: Sequence[ToolDefinition],
    limits: ModelLimits,
    counter: TokenCounter,
    original_items: Sequence[Item] = (),
) -> tuple[Budget, list[int]]:
    """The budget of the prepared copy and each message's measure (provenance shares the
    region by them); ``original_items`` are the caller's untouched items."""
    # Each system part is one ``system`` message: framed as a conversation message is.
    system_measure = sum(
        counter.frame_message("system", counter.measure_content(p.content)) for p in system_context
    )
    measures = message_measures(items, counter, original_items)
    return budget_of(system_measure, sum(measures), tools, limits, counter), measures


def budget_of(
    system_measure: int,
    conversation_measure: int,
    tools: Sequence[ToolDefinition],
    limits: ModelLimits,
    counter: TokenCounter,
) -> Budget:
    """The budget from the two regions' summed measures (the tool array is measured here)."""
    system_tokens = counter.tokens(system_measure)
    conversation_tokens = counter.tokens(conversation_measure) + counter.request_overhead_tokens
    tool_tokens = counter.tokens(counter.measure_tools(tools)) if tools else 0
    estimated = system_tokens + conversation_tokens + tool_tokens
    reserved = limits.output_reserve_tokens
    input_budget = limits.effective_input_tokens
    dynamic = input_budget - system_tokens - tool_tokens
    return Budget(
        system_context_tokens=system_tokens,
        conversation_tokens=conversation_tokens,
        tool_surface_tokens=tool_tokens,
        estimated_input_tokens=estimated,
        reserved_output_tokens=reserved,
        context_window_tokens=limits.context_window_tokens,
        effective_input_tokens=limits.effective_input_tokens,
        auto_compact_token_limit=limits.auto_compact_token_limit,
        reaches_auto_compact_limit=limits.reaches_auto_compact_limit(estimated, reserved),
        input_budget=input_budget,
        dynamic_budget=dynamic,
        dynamic_budget_exhausted=dynamic < 0,
        counter=counter.name,
        # Nothing compared yet: a service that knows the previous request sets these
        # (``app.core.caching.prefix_record.with_prefix``).
        stable_prefix_tokens=0,
        prefix_break=None,
    )
