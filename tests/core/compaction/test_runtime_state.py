from __future__ import annotations

import json
from typing import Any

import pytest

from app.core.compaction.runtime_state import (
    MAX_WARNINGS,
    Extension,
    RuntimeState,
    RuntimeStateError,
    derive_runtime_state,
    edited_paths,
    latest_plan,
    runtime_state_from_json,
    runtime_state_to_json,
)
from app.core.content import Item, RealOrigin
from app.core.turn_plan import Plan, PlanStep
from tests.core.compaction.items import change, tool_with
from tests.core.factories import assistant, call, result_block, user

PLAN = Plan("because", (PlanStep("write tests", "in_progress"),))


def test_paths_sorted_deduplicated_undone_and_blank_skipped() -> None:
    messages = [
        user("go", seq=1),
        tool_with(change("src/b.py"), change("src/a.py"), seq=2),
        tool_with(change("src/a.py"), change("gone.py", undone=True), change("  "), seq=3),
        tool_with({"kind": "diagnostic", "payload": 42}, change("src/é.py", undone=False), seq=4),
    ]
    assert edited_paths(messages) == ("src/a.py", "src/b.py", "src/é.py")


def test_path_cut_to_1024_before_dedup() -> None:
    base = "p" * 1024
    messages = [tool_with(change(base + "A"), change(base + "B"), change("q" * 1023), seq=1)]
    assert edited_paths(messages) == (base, "q" * 1023)


def test_at_most_128_paths_the_first_in_order() -> None:
    paths = [f"f{i:03}" for i in range(130)]
    assert edited_paths([tool_with(*map(change, reversed(paths)), seq=1)]) == tuple(paths[:128])
    assert len(edited_paths([tool_with(*map(change, paths[:128]), seq=1)])) == 128


@pytest.mark.parametrize(
    "artifact",
    [
        {"kind": "file_change", "payload": "src/a.py"},
        {"kind": "file_change"},
        change(None),
        change(7),
        change("a.py", undone="yes"),
        "not an object",
        {"payload": {}},
    ],
)
def test_an_undecodable_artifact_is_skipped_with_a_warning(artifact: Any) -> None:
    # Appends refuse it now; a row stored before that rule must not fail every compaction.
    messages = [tool_with(artifact, change("kept.py"), seq=7)]
    state = derive_runtime_state(messages, None, None)
    assert state.edited_paths == ("kept.py",)
    (warning,) = state.warnings
    assert warning["code"] == "artifact_skipped"
    assert warning["message"].startswith("message 7: invalid ")
    assert warning["message"].endswith("; the artifact was skipped")
    assert edited_paths(messages) == ("kept.py",)
    assert runtime_state_from_json(runtime_state_to_json(state)) == state


def test_warnings_are_capped_and_derived_anew() -> None:
    bad = [tool_with(change(7), seq=i) for i in range(1, 41)]
    state = derive_runtime_state(bad, None, None)
    assert len(state.warnings) == MAX_WARNINGS == 32
    assert derive_runtime_state([user("fixed", seq=1)], state, None).warnings == ()


def test_plan_written_as_turn_plan_extension() -> None:
    state = derive_runtime_state([], None, PLAN)
    assert state.extensions["turn_plan"] == Extension(1, PLAN.to_extension_value())


def test_manual_and_rewind_carry_the_previous_plan_and_unknown_keys() -> None:
    previous = RuntimeState(
        edited_paths=("old.py",),
        extensions={
            "turn_plan": Extension(1, PLAN.to_extension_value()),
            "vendor.notes": Extension(7, {"anything": [1, 2]}),
        },
        warnings=({"contributor_key": "x", "code": "collection_failed"},),
    )
    messages: list[Item] = [tool_with(change("new.py"), seq=1)]
    state = derive_runtime_state(messages, previous, None)
    assert state.extensions == previous.extensions
    # Paths are re-derived from all messages, not carried; warnings are cleared.
    assert state.edited_paths == ("new.py",)
    assert state.warnings == ()


def test_a_new_plan_replaces_the_previous_one_even_when_empty() -> None:
    previous = derive_runtime_state([], None, PLAN)
    state = derive_runtime_state([], previous, Plan(None, ()))
    assert state.extensions["turn_plan"].value == {"explanation": None, "steps": []}


def plan_call(call_id: str, steps: list[tuple[str, str]], raw: str | None = None) -> Item:
    arguments = raw or json.dumps({"plan": [{"step": t, "status": st} for t, st in steps]})
    return assistant("", call(call_id, "update_plan", arguments))


def plan_result(call_id: str, state: Any = "success") -> Item:
    text = "Plan updated" if state == "success" else "invalid arguments"
    block = result_block(call_id, text, name="update_plan", state=state)
    return Item("tool", "normal", [block], RealOrigin())


def test_the_sessions_latest_plan_is_taken_from_its_stored_messages() -> None:
    """Manual compaction after the turn that planned, with no earlier checkpoint."""
    messages = [
        user("go"),
        plan_call("p1", [("first", "pending")]),
        plan_result("p1"),
        plan_call("p2", [("second", "in_progress")]),
        plan_result("p2"),
        plan_call("p3", [], raw='{"plan": "not a list"}'),  # refused: an error result
        plan_result("p3", "error"),
        plan_call("p4", [("never answered", "pending")]),  # no result: not set
    ]
    assert latest_plan(messages) == Plan(None, (PlanStep("second", "in_progress"),))
    state = derive_runtime_state(messages, None, None)
    assert state.extensions["turn_plan"].value == {
        "explanation": None,
        "steps": [{"step": "second", "status": "in_progress"}],
    }


def test_the_running_turns_plan_and_a_carried_one_come_before_and_after_the_messages() -> None:
    messages = [plan_call("p1", [("from messages", "pending")]), plan_result("p1")]
    previous = derive_runtime_state([], None, PLAN)
    assert derive_runtime_state(messages, previous, PLAN).extensions["turn_plan"] == Extension(
        1, PLAN.to_extension_value()
    )
    from_messages = derive_runtime_state(messages, previous, None).extensions["turn_plan"]
    assert from_messages.value["steps"] == [{"step": "from messages", "status": "pending"}]
    assert derive_runtime_state([], previous, None).extensions == previous.extensions


def test_a_cleared_plan_is_the_latest_plan() -> None:
    messages = [
        plan_call("p1", [("a", "pending")]),
        plan_result("p1"),
        plan_call("p2", []),
        plan_result("p2"),
    ]
    assert latest_plan(messages) == Plan(None, ())


def test_json_round_trip() -> None:
    state = derive_runtime_state([tool_with(change("a.py"), seq=1)], None, PLAN)
    state = RuntimeState(
        edited_paths=state.edited_paths,
        extensions={**state.extensions, "zz": Extension(3, None)},
    )
    data = runtime_state_to_json(state)
    assert data == {
        "schema_version": 1,
        "edited_paths": ["a.py"],
        "extensions": {
            "turn_plan": {"schema_version": 1, "value": PLAN.to_extension_value()},
            "zz": {"schema_version": 3, "value": None},
        },
        "warnings": [],
    }
    assert runtime_state_from_json(data) == state


@pytest.mark.parametrize(
    "data",
    [
        None,
        {"schema_version": 2},
        {"schema_version": 1, "edited_paths": "a"},
        {"schema_version": 1, "extensions": {"k": {"value": 1}}},
        {"schema_version": 1, "extensions": {"k": {"schema_version": True, "value": 1}}},
        {"schema_version": 1, "warnings": [1]},
    ],
)
def test_bad_stored_state_is_refused(data: Any) -> None:
    with pytest.raises(RuntimeStateError):
        runtime_state_from_json(data)


def test_a_carried_plan_that_cannot_be_read_fails_the_compaction() -> None:
    previous = RuntimeState(extensions={"turn_plan": Extension(1, {"steps": "x"})})
    with pytest.raises(RuntimeStateError):
        derive_runtime_state([], previous, None)
    previous = RuntimeState(extensions={"turn_plan": Extension(9, PLAN.to_extension_value())})
    with pytest.raises(RuntimeStateError, match="schema version"):
        derive_runtime_state([], previous, None)
