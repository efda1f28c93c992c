"""One Budget shape: the API schemas that document it are checked against the core's ``Budget``
(``app.core.pipeline.prepared_call``), and ``app.services.budget`` is the one serialization every
answer uses."""

from __future__ import annotations

import typing
from dataclasses import fields

import pytest

from app.api.schemas.prepare import BudgetOut, PrefixBreakOut
from app.api.schemas.tokens import RegionTokensOut
from app.core.pipeline.prepared_call import Budget, PrefixBreak
from app.services.budget import (
    REGION_FIELDS,
    auto_compact_percent,
    budget_regions,
    budget_to_json,
    trigger_evidence,
)


def budget(**changes: object) -> Budget:
    base: dict[str, object] = {
        "system_context_tokens": 100,
        "conversation_tokens": 800,
        "tool_surface_tokens": 100,
        "estimated_input_tokens": 1_000,
        "reserved_output_tokens": 1_000,
        "context_window_tokens": 32_000,
        "effective_input_tokens": 28_000,
        "auto_compact_token_limit": 20_000,
        "reaches_auto_compact_limit": False,
        "input_budget": 28_000,
        "dynamic_budget": 27_000,
        "dynamic_budget_exhausted": False,
        "counter": "estimate",
    }
    return Budget(**(base | changes))  # type: ignore[arg-type]


def test_the_budget_schema_has_the_dataclass_fields_in_its_order() -> None:
    # Field order is wire order: the answer's JSON lists them as the dataclass does.
    assert list(BudgetOut.model_fields) == [f.name for f in fields(Budget)]
    assert list(PrefixBreakOut.model_fields) == [f.name for f in fields(PrefixBreak)]


def test_the_budget_schema_has_the_dataclass_types() -> None:
    hints = typing.get_type_hints(Budget)
    for name, info in BudgetOut.model_fields.items():
        expected = hints[name]
        if name == "prefix_break":
            assert info.annotation == PrefixBreakOut | None
        else:
            assert info.annotation is expected, name


def test_the_regions_are_the_budget_figures_the_schema_names() -> None:
    assert tuple(RegionTokensOut.model_fields) == REGION_FIELDS
    one = budget()
    assert budget_regions(one) == {name: budget_to_json(one)[name] for name in REGION_FIELDS}


@pytest.mark.parametrize("prefix_break", [None, PrefixBreak(index=3, reason="world_state")])
def test_the_one_serialization_is_what_the_schema_reads_back(
    prefix_break: PrefixBreak | None,
) -> None:
    one = budget(stable_prefix_tokens=40, prefix_break=prefix_break)
    written = budget_to_json(one)
    assert BudgetOut.model_validate(written).model_dump(mode="json") == written
    assert list(written) == list(BudgetOut.model_fields)


@pytest.mark.parametrize(
    ("estimated", "percent", "trigger_percent"),
    [
        # line = min(20 000, 28 000); used = estimated + 1 000 reserved
        (18_998, 99.99, 100),  # one token under the line: the floor never shows 100
        (18_999, 99.99, 100),
        (19_000, 100.0, 100),  # at the line
        (19_001, 100.0, 100),
    ],
)
def test_the_trigger_line_figures(estimated: int, percent: float, trigger_percent: int) -> None:
    one = budget(estimated_input_tokens=estimated)
    assert one.auto_compact_line == 20_000
    assert one.auto_compact_used == estimated + 1_000
    assert auto_compact_percent(one) == percent
    assert trigger_evidence(one)["trigger_percent"] == trigger_percent
