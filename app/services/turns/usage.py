"""What a turn records of each model call: the usage it adds to the turn's columns, and the
durable ``model_call_finished`` update (stored in the step that stores the model's answer, so it
costs no transaction of its own)."""

from __future__ import annotations

from typing import Any, Final, TypedDict

from app.core.pipeline.prepared_call import Budget
from app.providers.base import Usage
from app.services.budget import budget_to_json

__all__ = ["USAGE_FIELDS", "ModelCallFinished", "model_call_finished", "usage_columns"]

# The turn's usage columns, each the Σ of the same ``Usage`` figure over its model calls.
USAGE_FIELDS: Final = (
    "input_tokens",
    "output_tokens",
    "cached_tokens",
    "cache_creation_tokens",
    "reasoning_tokens",
)


class ModelCallFinished(TypedDict):
    """The ``model_call_finished`` update (spec §16)."""

    model_call_index: int
    model_id: str
    usage: dict[str, int]
    budget: dict[str, Any]  # ``BudgetOut``, as ``services/budget.py`` writes it


def usage_columns(usage: Usage) -> dict[str, int]:
    """The figures to add to the turn (0 where the provider reported nothing)."""
    return {name: getattr(usage, name) or 0 for name in USAGE_FIELDS}


def model_call_finished(
    *, index: int, model_id: str, usage: dict[str, int], budget: Budget
) -> ModelCallFinished:
    """The update's payload: which call, what the provider reported (``input_tokens`` the whole
    prompt, cache reads and writes included) and the budget of the request as sent, serialized
    as every prepare answer serializes it."""
    return {
        "model_call_index": index,
        "model_id": model_id,
        "usage": dict(usage),
        "budget": budget_to_json(budget),
    }
