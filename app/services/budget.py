"""The core's ``Budget`` (``app.core.pipeline.prepared_call``) on the wire: one home.

Every answer that carries a budget writes it here — prepare answers (stateless, session,
inspection), a model call's live update, the per-region figures of a token count, the trigger
evidence of a compaction — so a field added to the ``Budget`` reaches all of them.
``BudgetOut`` and ``RegionTokensOut`` (``app.api.schemas``) document the same shapes;
tests/api/test_budget_shape.py checks them against the dataclass field by field.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, NotRequired, TypedDict

from app.core.pipeline.prepared_call import Budget, PrefixBreak

__all__ = [
    "REGION_FIELDS",
    "TriggerEvidence",
    "TurnCallEvidence",
    "auto_compact_percent",
    "budget_regions",
    "budget_to_json",
    "trigger_evidence",
]

# The per-region figures of a counted prepare body (``POST /v1/tokens/count``), in wire order.
REGION_FIELDS = (
    "system_context_tokens",
    "conversation_tokens",
    "tool_surface_tokens",
    "estimated_input_tokens",
)


def budget_to_json(budget: Budget) -> dict[str, Any]:
    """The ``budget`` object of every answer that carries one: each field of the dataclass, in
    its order (``prefix_break`` an object or ``null``): ``asdict``'s dict, read field by field
    (``asdict`` deep-copies every integer on the way, a tenth of a small prepare's rendering)."""
    figures = {name: getattr(budget, name) for name in _BUDGET_FIELDS}
    found = budget.prefix_break
    if found is not None:
        figures["prefix_break"] = {name: getattr(found, name) for name in _BREAK_FIELDS}
    return figures


_BUDGET_FIELDS = tuple(field.name for field in fields(Budget))
_BREAK_FIELDS = tuple(field.name for field in fields(PrefixBreak))


def budget_regions(budget: Budget) -> dict[str, int]:
    """The ``regions`` of a token count: the region figures of the budget."""
    return {name: getattr(budget, name) for name in REGION_FIELDS}


def auto_compact_percent(budget: Budget) -> float:
    """Estimated input + reserved output as a percentage of the trigger line (100 = compacts).

    Rounded down to 2 decimals, in integers: rounding to nearest showed 100.0 one token below a
    line of 20 000 or more, where nothing compacts yet. So it is ≥ 100 exactly when
    ``reaches_auto_compact_limit`` is true.
    """
    return budget.auto_compact_used * 10_000 // budget.auto_compact_line / 100


@dataclass(frozen=True, slots=True)
class TurnCallEvidence:
    """What a turn's (or a session prepare's) request said when it crossed the trigger line:
    its budget and which model call of the turn it was (1 for a session prepare)."""

    budget: Budget
    model_call_index: int


class TriggerEvidence(TypedDict):
    """A threshold/overflow checkpoint's ``trigger`` (``CheckpointOut.trigger``)."""

    context_window_tokens: int
    effective_input_tokens: int
    auto_compact_token_limit: int
    estimated_input_tokens: int
    reserved_output_tokens: int
    trigger_percent: int | None
    counter: str
    model_call_index: NotRequired[int]


def trigger_evidence(before: Budget, call: TurnCallEvidence | None = None) -> TriggerEvidence:
    """Why a threshold/overflow compaction fired (stored with the checkpoint, its ``trigger``):
    the figures of ``before``, the budget of the conversation the compaction read, with the
    window and the estimate of the request that crossed the line (``call``) when there was one.

    ``trigger_percent`` is rounded to the nearest whole percent, as checkpoints have always
    stored it (``auto_compact_percent`` is the floor to 2 decimals of the same ratio).
    """
    line, used = before.auto_compact_line, before.auto_compact_used
    evidence: TriggerEvidence = {
        "context_window_tokens": before.context_window_tokens,
        "effective_input_tokens": before.effective_input_tokens,
        "auto_compact_token_limit": before.auto_compact_token_limit,
        "estimated_input_tokens": before.estimated_input_tokens,
        "reserved_output_tokens": before.reserved_output_tokens,
        "trigger_percent": round(used * 100 / line) if line > 0 else None,
        "counter": before.counter,
    }
    if call is not None:
        evidence["context_window_tokens"] = call.budget.context_window_tokens
        evidence["estimated_input_tokens"] = call.budget.estimated_input_tokens
        evidence["model_call_index"] = call.model_call_index
    return evidence
