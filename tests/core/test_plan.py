from __future__ import annotations

import json
from typing import Any

import pytest

from app.core.turn_plan import (
    MAX_PLAN_STEPS,
    MAX_STEP_CHARS,
    UPDATE_PLAN_TOOL,
    Plan,
    PlanArgumentsInvalid,
    PlanStep,
    parse_update_plan_arguments,
)


def steps(n: int, text: str = "step", status: str = "pending") -> list[dict[str, str]]:
    return [{"step": f"{text} {i}", "status": status} for i in range(n)]


def refused(arguments: Any) -> str:
    with pytest.raises(PlanArgumentsInvalid) as info:
        parse_update_plan_arguments(arguments)
    assert info.value.code == "invalid_arguments"
    return info.value.detail


def test_valid_plan_from_raw_json() -> None:
    raw = json.dumps(
        {
            "explanation": "start",
            "plan": [
                {"step": "read", "status": "completed"},
                {"step": "edit", "status": "in_progress"},
                {"step": "test", "status": "pending"},
            ],
        }
    )
    plan = parse_update_plan_arguments(raw)
    assert plan == Plan(
        "start",
        (
            PlanStep("read", "completed"),
            PlanStep("edit", "in_progress"),
            PlanStep("test", "pending"),
        ),
    )
    assert plan.unfinished_step_count == 2
    assert plan.to_json()["plan"][1] == {"step": "edit", "status": "in_progress"}


def test_empty_plan_clears_and_explanation_is_optional() -> None:
    assert parse_update_plan_arguments({"plan": []}) == Plan(None, ())


def test_128_steps_accepted_129_refused() -> None:
    assert len(parse_update_plan_arguments({"plan": steps(MAX_PLAN_STEPS)}).steps) == 128
    assert refused({"plan": steps(MAX_PLAN_STEPS + 1)}) == "plan must not exceed 128 steps"


def test_1024_characters_accepted_1025_refused() -> None:
    ok = {"plan": [{"step": "é" * MAX_STEP_CHARS, "status": "pending"}]}
    assert parse_update_plan_arguments(ok).steps[0].step == "é" * 1024
    long = {"plan": [{"step": "a", "status": "pending"}, {"step": "x" * 1025, "status": "pending"}]}
    assert refused(long) == "plan step 1 exceeds 1024 characters"


def test_two_in_progress_steps_are_refused() -> None:
    plan = steps(1) + steps(2, status="in_progress")
    assert refused({"plan": plan}) == (
        "at most one step may be in_progress, but steps 1 and 2 are both in_progress"
    )


def test_one_in_progress_is_fine() -> None:
    assert parse_update_plan_arguments({"plan": steps(1, status="in_progress")})


def test_blank_step_is_refused() -> None:
    assert refused({"plan": [{"step": "  \n", "status": "pending"}]}) == (
        "plan step 0 must not be blank"
    )


@pytest.mark.parametrize(
    "arguments",
    [
        "not json",
        "[]",
        {},
        {"plan": "x"},
        {"plan": [], "extra": 1},
        {"plan": ["x"]},
        {"plan": [{"step": "a"}]},
        {"plan": [{"step": "a", "status": "done"}]},
        {"plan": [{"step": "a", "status": "pending", "note": "x"}]},
        {"plan": [{"step": 3, "status": "pending"}]},
        {"plan": [], "explanation": 3},
    ],
)
def test_malformed_arguments_are_parse_errors(arguments: Any) -> None:
    assert refused(arguments).startswith("failed to parse update_plan arguments: ")


def test_extension_value_round_trip() -> None:
    plan = Plan("why", (PlanStep("a", "pending"),))
    value = plan.to_extension_value()
    assert value == {"explanation": "why", "steps": [{"step": "a", "status": "pending"}]}
    assert Plan.from_extension_value(value) == plan
    with pytest.raises(PlanArgumentsInvalid):
        Plan.from_extension_value(["nope"])


def test_tool_definition() -> None:
    assert UPDATE_PLAN_TOOL["name"] == "update_plan"
    schema = UPDATE_PLAN_TOOL["input_schema"]
    assert schema["required"] == ["plan"]
    assert schema["additionalProperties"] is False
    items = schema["properties"]["plan"]["items"]
    assert items["properties"]["status"]["enum"] == ["pending", "in_progress", "completed"]
    assert schema["properties"]["plan"]["maxItems"] == 128
    json.dumps(UPDATE_PLAN_TOOL)  # serializable as sent to a provider
