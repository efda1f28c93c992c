"""The budget every answer and ``model_call_finished`` carry (``budget_to_json``) is exactly
``asdict`` of the core's ``Budget``, key order included: it is built without ``asdict``'s deep
copy, and ``prefix_break`` must stay the last key."""

from __future__ import annotations

from dataclasses import asdict, fields

import orjson
import pytest

from app.core.pipeline.prepared_call import Budget, PrefixBreak
from app.services.budget import budget_to_json
from app.services.turns.usage import model_call_finished


def _budget(prefix_break: PrefixBreak | None) -> Budget:
    return Budget(
        system_context_tokens=1,
        conversation_tokens=2,
        tool_surface_tokens=3,
        estimated_input_tokens=6,
        reserved_output_tokens=4,
        context_window_tokens=100,
        effective_input_tokens=96,
        auto_compact_token_limit=80,
        reaches_auto_compact_limit=False,
        input_budget=90,
        dynamic_budget=-1,
        dynamic_budget_exhausted=True,
        counter="estimate",
        stable_prefix_tokens=5,
        prefix_break=prefix_break,
    )


@pytest.mark.parametrize("prefix_break", [None, PrefixBreak(3, "history_changed")])
def test_the_budget_is_asdict_byte_for_byte(prefix_break: PrefixBreak | None) -> None:
    budget = _budget(prefix_break)
    assert orjson.dumps(budget_to_json(budget)) == orjson.dumps(asdict(budget))
    payload = model_call_finished(index=2, model_id="m", usage={"input_tokens": 1}, budget=budget)
    assert orjson.dumps(payload["budget"]) == orjson.dumps(asdict(budget))


def test_prefix_break_is_the_budgets_last_field() -> None:
    assert [f.name for f in fields(Budget)][-1] == "prefix_break"
