"""The prepare pipeline (SPEC §2): composes the stages, adds nothing of its own.

Order: capabilities → prune (§2.1) → project (§2.2) → normalize (§2.3) → validate (§2.4) →
budget (§3.1, §3.2) → assemble (§2.4). Pure and deterministic: no I/O, no clock, the input is
never mutated (stages copy on write), and the same input gives byte-identical output.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.assemble import assemble_request, validate_conversation, validate_system_context
from app.core.budget import measure_budget
from app.core.capabilities import ModelCapabilities
from app.core.content import Item
from app.core.counting import ESTIMATE, TokenCounter
from app.core.normalize import normalize
from app.core.prepared import (
    PreparedModelCall,
    ProjectionReport,
    PruningWatermark,
    SystemPart,
    ToolDefinition,
)
from app.core.project import project_tool_results
from app.core.prune import prune_tool_results

__all__ = ["prepare"]

_NO_PRUNING = PruningWatermark()


def prepare(
    system_context: Sequence[SystemPart],
    conversation: Sequence[Item],
    tools: Sequence[ToolDefinition],
    capabilities: ModelCapabilities,
    pruning: PruningWatermark = _NO_PRUNING,
    counter: TokenCounter = ESTIMATE,
) -> PreparedModelCall:
    """Turn the three regions and the model's capabilities into a ``PreparedModelCall``.

    Raises ``InvalidInput`` with the codes of SPEC §2–3 (``invalid_capabilities`` first).
    """
    limits = capabilities.limits()  # fail before anything else is looked at
    pruned = prune_tool_results(conversation, pruning)
    projected = project_tool_results(pruned.items)
    normalized = normalize(projected.items, accepts_data_blocks=capabilities.accepts_data_blocks)
    validate_system_context(system_context, counter)
    validate_conversation(normalized.items)
    budget = measure_budget(
        system_context, normalized.items, tools, limits, counter, original_items=conversation
    )
    request, provenance = assemble_request(
        system_context, normalized.items, tools, capabilities.max_output_tokens
    )
    report = ProjectionReport(
        pruned_tool_results=pruned.pruned_tool_results,
        truncated_tool_results=projected.truncated_tool_results,
        original_tokens=projected.original_tokens,
        projected_tokens=projected.projected_tokens,
        synthesized_tool_results=normalized.synthesized_tool_results,
        dropped_orphan_results=normalized.dropped_orphan_results,
        filtered_data_blocks=normalized.filtered_data_blocks,
    )
    return PreparedModelCall(request, budget, report, provenance, normalized.items)
