"""Inputs and outputs of the prepare pipeline (spec §2, §3.1).

``prepare()`` (``app.core.pipeline.prepare``) turns ``SystemPart``s, conversation ``Item``s,
``ToolDefinition``s and ``ModelCapabilities`` into a ``PreparedModelCall``.
Everything here is plain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from app.core.content import Block, Item
from app.core.counting import TokenCounter
from app.core.pipeline.provenance import (
    PersistedProvenance,
    Provenance,
    ProvidedProvenance,
    SynthesizedProvenance,
    provenance_of,
    token_shares,
)

if TYPE_CHECKING:  # the walk's module imports this one
    from app.core.pipeline.one_pass.continuation import ResumableWalk

__all__ = [
    "BreakReason",
    "Budget",
    "PersistedProvenance",
    "PrefixBreak",
    "PreparedModelCall",
    "ProjectionReport",
    "Provenance",
    "ProvidedProvenance",
    "PruningWatermark",
    "RequestMessage",
    "SynthesizedProvenance",
    "SystemPart",
    "ToolDefinition",
]


@dataclass(frozen=True, slots=True)
class SystemPart:
    key: str
    content: list[Block]


class ToolDefinition(TypedDict):
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class PruningWatermark:
    through_sequence: int | None = None
    spill_directory: str | None = None


class RequestMessage(TypedDict):
    """A message of the provider-independent request; tool results carry no artifacts."""

    role: Literal["system", "user", "assistant", "tool"]
    content: list[Block]


BreakReason = Literal[
    "pruning", "compaction", "world_state", "system_changed", "tools_changed", "history_changed"
]


@dataclass(frozen=True, slots=True)
class PrefixBreak:
    """Where this request first differs from the previous one, and why
    (``app.core.caching.prefix_record``):
    ``index`` into ``request["messages"]`` (system messages included; 0 for the tools)."""

    index: int
    reason: BreakReason


@dataclass(frozen=True, slots=True)
class Budget:
    system_context_tokens: int
    conversation_tokens: int
    tool_surface_tokens: int
    estimated_input_tokens: int
    reserved_output_tokens: int
    context_window_tokens: int
    effective_input_tokens: int
    auto_compact_token_limit: int
    reaches_auto_compact_limit: bool
    input_budget: int
    dynamic_budget: int  # may be negative: ``dynamic_budget_exhausted`` says so
    dynamic_budget_exhausted: bool
    counter: str
    # Against the previous request (``app.core.caching.prefix_record``); 0 / ``None`` when nothing
    # is compared.
    stable_prefix_tokens: int = 0
    prefix_break: PrefixBreak | None = None

    @property
    def auto_compact_line(self) -> int:
        """The trigger line (spec §3.2): the auto-compact limit, never above what the model
        takes as input."""
        return min(self.auto_compact_token_limit, self.effective_input_tokens)

    @property
    def auto_compact_used(self) -> int:
        """What counts against the trigger line: the input and the output reserved for it."""
        return self.estimated_input_tokens + self.reserved_output_tokens


@dataclass(slots=True)
class ProjectionReport:
    pruned_tool_results: int = 0
    truncated_tool_results: int = 0
    original_tokens: int = 0
    projected_tokens: int = 0
    synthesized_tool_results: int = 0
    dropped_orphan_results: int = 0
    filtered_data_blocks: int = 0


@dataclass(frozen=True, slots=True)
class PreparedModelCall:
    # {"messages": [RequestMessage], "tools": [...], "max_output_tokens": n}
    request: dict[str, Any]
    budget: Budget
    projection: ProjectionReport
    # The normalized conversation items, in request order (after the system messages); services
    # use them (e.g. compaction) without re-running the stages.
    items: list[Item]
    # Each item's measure by ``counter`` (Σ = the Conversation region's measure).
    measures: list[int]
    counter: TokenCounter
    # The request's prefix record (``app.core.caching.prefix_record``), once a service
    # compared it; and how many leading request messages lie wholly in the stable prefix
    # (``app.core.caching.prefix_comparison``).
    prefix_record: bytes | None = None
    stable_messages: int | None = None
    # The pruning watermark the request was prepared with (the cache plan anchors on it).
    pruned_through_sequence: int | None = None
    # The walk of the Conversation's leading whole segments, for a later call that extends this
    # one (``app/core/pipeline/one_pass/continuation.py``); not part of the call's value.
    walk: ResumableWalk | None = field(default=None, compare=False, repr=False)
    # ``prepare(extends=...)``: the earlier call's ``items`` (that very list) whose first
    # ``shares`` items this request's first ones are, with their very request messages. Not
    # part of the request (equality ignores them): what the prefix record builds on
    # (``record_extending``) without comparing the items again.
    shared_with: list[Item] | None = field(default=None, compare=False, repr=False)
    shares: int = field(default=0, compare=False, repr=False)

    @property
    def provenance(self) -> list[Provenance]:
        """One entry per item, with its share of ``budget.conversation_tokens``.

        Built when asked for: a turn's model calls never ask, a prepare answer asks once.
        """
        return provenance_of(self.items, token_shares(self.measures, self.counter))
