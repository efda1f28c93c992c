"""Tool-call checks and the doom-loop record (pure parts of the runner)."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.pipeline.prepared_call import ToolDefinition
from app.services.conversation import SERVER_TOOLS
from app.services.lru import BytesLRU
from app.services.turns import tools as tools_module
from app.services.turns.tools import DoomRecord, check_call

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
TOOLS: dict[str, ToolDefinition] = {
    "count": {"name": "count", "description": "", "input_schema": SCHEMA},
    "free": {"name": "free", "description": "", "input_schema": {}},
    "broken": {"name": "broken", "description": "", "input_schema": {"type": 12}},
    **{t["name"]: t for t in SERVER_TOOLS},
}


def test_canonical_arguments_sort_keys() -> None:
    first, _ = check_call("free", '{"b": 1, "a": [2, {"d": 1, "c": 0}]}', TOOLS)
    second, _ = check_call("free", '{"a":[2,{"c":0,"d":1}],"b":1}', TOOLS)
    assert first == second == '{"a":[2,{"c":0,"d":1}],"b":1}'


@pytest.mark.parametrize(
    ("name", "raw", "prefix"),
    [
        ("count", "{", "invalid tool input: "),
        ("count", "", "invalid tool input: "),
        ("missing", "{}", "tool not found: 'missing'"),
        ("count", '{"n": "3"}', "invalid arguments for tool 'count': '3' is not of type"),
        ("count", "{}", "invalid arguments for tool 'count': 'n' is a required property"),
    ],
)
def test_rejections_are_error_results(name: str, raw: str, prefix: str) -> None:
    canonical, result = check_call(name, raw, TOOLS)
    assert canonical is None
    assert result is not None
    assert result["state"] == "error"
    assert result["output"][0]["text"].startswith(prefix)


def test_schema_violation_names_the_path() -> None:
    _, result = check_call("count", '{"n": 1.5}', TOOLS)
    assert result is not None
    assert "(at /n)" in result["output"][0]["text"]


def test_broken_agent_schema_and_control_tools_are_not_schema_checked() -> None:
    assert check_call("broken", '{"x": 1}', TOOLS)[1] is None
    assert check_call("update_plan", '{"anything": true}', TOOLS)[1] is None


def test_doom_record_counts_only_identical_consecutive_calls() -> None:
    record = DoomRecord("a", "{}", 1)
    assert record.after("a", "{}").count == 2
    assert record.after("a", "{}").after("a", "{}").count == 3
    assert record.after("a", '{"x":1}').count == 1
    assert record.after("b", "{}").count == 1
    assert DoomRecord.from_json(record.to_json()) == record
    assert DoomRecord.from_json(None) is None


def test_schema_validators_are_built_once_per_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    real = tools_module._checked_validator

    def building(schema_json: str) -> Any:
        built.append(schema_json)
        return real(schema_json)

    monkeypatch.setattr(tools_module, "_checked_validator", building)
    monkeypatch.setattr(tools_module, "_validators", BytesLRU(tools_module.VALIDATOR_CACHE_BYTES))
    for raw in ('{"n": 1}', '{"n": "x"}', '{"n": 2}'):
        check_call("count", raw, TOOLS)
    # The same schema spelled with its keys in another order shares the validator.
    reordered: dict[str, ToolDefinition] = {
        "count": {
            "name": "count",
            "description": "",
            "input_schema": dict(reversed(SCHEMA.items())),
        }
    }
    assert check_call("count", '{"n": "x"}', reordered)[1] is not None
    assert len(built) == 1
    # A broken schema is remembered as such (never checked against).
    assert check_call("broken", '{"x": 1}', TOOLS)[1] is None
    assert check_call("broken", '{"x": 1}', TOOLS)[1] is None
    assert len(built) == 2
    # Bounded by the bytes of schema JSON it holds: the oldest goes first.
    monkeypatch.setattr(tools_module, "_validators", BytesLRU(len(built[0])))
    check_call("count", '{"n": 1}', TOOLS)
    check_call("broken", '{"x": 1}', TOOLS)
    check_call("count", '{"n": 1}', TOOLS)
    assert len(built) == 5
