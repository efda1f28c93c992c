"""Where a request asks the provider to cache its prefix (spec §10): the one breakpoint rule.

Providers cache the longest prefix of a request they have seen before; Anthropic caches only up
to the blocks marked ``cache_control`` (at most 4 per request, read in the order tools → system →
messages), OpenAI caches automatically and routes by ``prompt_cache_key``. ``plan_cache`` decides,
from the provider-independent request alone, which blocks are marked and which key is sent; the
encoders (``app.providers.encoding``) place what it decides. The rule, in the provider's order:

1. the end of the tool definitions (the last tool), when there are tools;
2. the end of the System Context (the last block of the last system message), when there is one;
3. the end of the stable prefix: the last block of message ``stable_messages - 1``, the last
   message that is byte-identical to the session's previous request (``stable_messages``, from
   ``app.core.caching.prefix_record``), when it lies in the conversation before this request's last
   message.
   When the whole previous request is a prefix of this one, that is the previous call's moving
   breakpoint, so the cache it wrote is read even though this call's own breakpoint is new.
   When the prefix broke (a pruning, say), it is the last block before the break: the provider
   finds there, within its 20-block lookback, the boundary an earlier call wrote, and reads the
   part of the history that is still cached instead of only the tools and the system;
4. the moving breakpoint: the last block of the conversation's last message;
5. the pruning anchor: the last block of the last message at or below the pruning watermark.
   The next pruning breaks the prefix after it (spec §7.2 prunes only past the watermark), so
   the boundary written there is still valid then, and that pruning's rule-3 breakpoint finds it
   within the lookback; without it, a pruning soon after another finds no valid boundary newer
   than the previous pruning's and the provider reads only the tools and the system.

At most 4 are marked: with 5 candidates the tool breakpoint goes, because the system
breakpoint's prefix holds the tools and a session's tools and system never change apart (a
stateless caller who changes only its system prompt then reads nothing from cache).

A breakpoint whose prefix (cumulative tokens from the start of the request, by the service's
counter) is under ``MIN_CACHEABLE_TOKENS`` is not marked: the provider would ignore it. Message
breakpoints never fall on system messages (their end is rule 2's breakpoint).

Markers change no content: the budget (the estimate of what is sent) is the same with caching
on and off, and the providers bill no input tokens for them.

Sources (consulted 2026-12-02 through the project's documentation search): Anthropic "Prompt
caching" (``cache_control {"type": "ephemeral"}`` on tools, system blocks and message blocks; up
to 4 breakpoints; a minimum cacheable prompt length of 1024 tokens for most models, more for
some; thinking blocks cannot carry ``cache_control``); OpenAI "Prompt caching" (automatic for
prompts of 1024 tokens or more; ``prompt_cache_key`` influences routing to the same cache).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from app.core.capabilities import PROMPT_CACHING_MODES, PromptCaching
from app.core.content import compact_json
from app.core.counting import TokenCounter
from app.core.pipeline.prepared_call import PreparedModelCall

__all__ = [
    "MAX_BREAKPOINTS",
    "MIN_CACHEABLE_TOKENS",
    "PROMPT_CACHING_MODES",
    "CachePlan",
    "PrefixFigures",
    "PromptCaching",
    "cache_key_of",
    "plan_cache",
    "plan_for",
    "prefix_figures",
]

# Anthropic documents 1024 tokens for most models and 2048 or 4096 for some; a marker on a
# shorter prefix is ignored by the provider (never an error), so the constant errs low: a marker
# that might be ignored costs nothing, one left out where it would have worked costs a cache.
MIN_CACHEABLE_TOKENS: Final = 1024
MAX_BREAKPOINTS: Final = 4  # Anthropic's limit of cache_control blocks per request


@dataclass(frozen=True, slots=True)
class CachePlan:
    """What an encoder marks: the last tool, the last system block, the last block of each
    message in ``message_breakpoints`` (indexes into ``request["messages"]``, system messages
    included), and the key OpenAI routes by (``None``: none is sent)."""

    mark_tools: bool
    mark_system: bool
    message_breakpoints: tuple[int, ...]
    cache_key: str | None


@dataclass(frozen=True, slots=True)
class PrefixFigures:
    """Cumulative tokens from the start of the request, in the provider's order (tools, system,
    messages), from the figures the prepare measured (nothing is serialized again).

    ``measures`` are the conversation messages' additive measures by ``counter``; the prefix
    through a message is the region's rounding of their running sum, as the budget rounds it.
    """

    through_tools: int
    through_system: int
    system_messages: int
    measures: Sequence[int]
    counter: TokenCounter

    def through_message(self, index: int) -> int:
        """Tokens through message ``index`` of ``request["messages"]`` (system ones included)."""
        conversation = index - self.system_messages + 1
        if conversation <= 0:
            return self.through_system
        return self.through_system + self.counter.tokens(sum(self.measures[:conversation]))


def prefix_figures(prepared: PreparedModelCall) -> PrefixFigures:
    """The figures of ``prepared``, from its budget and per-message measures."""
    budget = prepared.budget
    messages = prepared.request["messages"]
    return PrefixFigures(
        through_tools=budget.tool_surface_tokens,
        through_system=budget.tool_surface_tokens + budget.system_context_tokens,
        system_messages=len(messages) - len(prepared.measures),
        measures=prepared.measures,
        counter=prepared.counter,
    )


def cache_key_of(request: Mapping[str, Any], seed: str | None) -> str:
    """``ctxsvc-`` and 16 hex digits of a SHA-256: of ``seed`` (the session id: one key per
    session), or without one (the stateless prepare) of the tools and the system messages, so
    one agent's calls share a key. Ids are hashed: nothing the caller named leaves the machine."""
    if seed is None:
        system = [m for m in request["messages"] if m["role"] == "system"]
        material = compact_json({"tools": list(request.get("tools") or []), "system": system})
    else:
        material = seed
    return "ctxsvc-" + hashlib.sha256(material.encode("utf-8")).hexdigest()[:16]


def plan_cache(
    request: Mapping[str, Any],
    figures: PrefixFigures,
    *,
    stable_messages: int | None,
    prompt_caching: PromptCaching,
    seed: str | None,
    anchor: int | None = None,
) -> CachePlan | None:
    """The breakpoints of ``request`` by the module's rule; ``None`` when caching is off.
    ``anchor``: the index in ``request["messages"]`` of rule 5's message, if any."""
    if prompt_caching == "off":
        return None
    messages: Sequence[Mapping[str, Any]] = request["messages"]
    system_count = figures.system_messages
    mark_tools = bool(request.get("tools")) and figures.through_tools >= MIN_CACHEABLE_TOKENS
    mark_system = system_count > 0 and figures.through_system >= MIN_CACHEABLE_TOKENS
    last = len(messages) - 1
    candidates: set[int] = set()
    if stable_messages is not None and system_count <= stable_messages - 1 < last:
        candidates.add(stable_messages - 1)
    if last >= system_count:
        candidates.add(last)
    if anchor is not None and system_count <= anchor < last:
        candidates.add(anchor)
    breakpoints = tuple(
        i for i in sorted(candidates) if figures.through_message(i) >= MIN_CACHEABLE_TOKENS
    )
    if mark_tools and mark_system + len(breakpoints) == MAX_BREAKPOINTS:
        mark_tools = False  # the system breakpoint's prefix holds the tools (rule 5)
    assert mark_tools + mark_system + len(breakpoints) <= MAX_BREAKPOINTS
    return CachePlan(
        mark_tools=mark_tools,
        mark_system=mark_system,
        message_breakpoints=breakpoints,
        cache_key=cache_key_of(request, seed),
    )


def plan_for(
    prepared: PreparedModelCall,
    *,
    prompt_caching: PromptCaching,
    seed: str | None,
    stable_messages: int | None,
) -> CachePlan | None:
    """``plan_cache`` of a prepared call, with its own figures."""
    if prompt_caching == "off":
        return None
    figures = prefix_figures(prepared)
    return plan_cache(
        prepared.request,
        figures,
        stable_messages=stable_messages,
        prompt_caching=prompt_caching,
        seed=seed,
        anchor=_pruning_anchor(prepared, figures.system_messages),
    )


def _pruning_anchor(prepared: PreparedModelCall, system_messages: int) -> int | None:
    """Rule 5's message: the last one at or below the pruning watermark (a stored message with
    a sequence; the scan runs from the end, where a recent watermark lies)."""
    through = prepared.pruned_through_sequence
    if through is None:
        return None
    items = prepared.items
    for index in range(len(items) - 1, -1, -1):
        sequence = items[index].sequence
        if sequence is not None and sequence <= through:
            return system_messages + index
    return None
