"""Inputs and outputs of the prepare pipeline (SPEC §2, §3.1).

``prepare()`` (``app.core.prepare``) turns ``SystemPart``s, conversation ``Item``s,
``ToolDefinition``s and ``ModelCapabilities`` into a ``PreparedModelCall``.
Everything here is plain data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypedDict

from app.core.content import Block, Item

__all__ = [
    "Budget",
    "PreparedModelCall",
    "ProjectionReport",
    "Provenance",
    "PruningWatermark",
    "RequestMessage",
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


class PersistedProvenance(TypedDict):
    type: Literal["persisted"]
    message_id: str


class SynthesizedProvenance(TypedDict):
    type: Literal["synthesized"]


Provenance: TypeAlias = PersistedProvenance | SynthesizedProvenance


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
    provenance: list[Provenance]
    # The normalized conversation items, in request order (after the system messages); services
    # use them (e.g. compaction) without re-running the stages.
    items: list[Item] = field(default_factory=list)
