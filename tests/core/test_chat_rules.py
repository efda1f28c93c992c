"""spec §5 append rules on whole batches."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.chat_rules import check_append
from app.core.errors import ServiceError


def call(call_id: str, name: str = "read") -> dict[str, Any]:
    return {"type": "tool_call", "id": call_id, "name": name, "input": "{}"}


def result(call_id: str) -> dict[str, Any]:
    return {
        "type": "tool_result",
        "id": call_id,
        "name": "",
        "output": [{"type": "text", "text": "ok"}],
        "state": "success",
        "artifacts": [],
    }


TEXT = [{"type": "text", "text": "hi"}]


def test_calls_opened_in_a_batch_can_be_answered_in_it() -> None:
    plan = check_append(
        [
            ("assistant", "normal", [call("a"), call("b", "grep")]),
            ("tool", "normal", [result("b")]),
        ],
        {},
    )
    assert plan.messages[0].opened_calls == (("a", "read"), ("b", "grep"))
    assert plan.messages[1].resolved_call == "b"
    assert plan.messages[1].tool_name == "grep"


def test_a_result_for_a_call_of_an_earlier_append_uses_its_name() -> None:
    plan = check_append([("tool", "normal", [result("x")])], {"x": "bash"})
    assert plan.messages[0].tool_name == "bash"


@pytest.mark.parametrize(
    ("batch", "unresolved", "code", "index"),
    [
        ([("system", "normal", TEXT)], {}, "system_message_in_conversation", 0),
        ([("user", "normal", TEXT), ("user", "normal", [])], {}, "empty_message", 1),
        ([("tool", "normal", [])], {}, "empty_message", 0),
        ([("user", "normal", [{"type": "text", "text": " \n\u3000"}])], {}, "empty_message", 0),
        ([("user", "skill_instruction", [{"type": "text", "text": ""}])], {}, "empty_message", 0),
        ([("tool", "normal", TEXT)], {}, "invalid_tool_message", 0),
        (
            [("tool", "normal", [result("x"), result("y")])],
            {"x": "r", "y": "r"},
            "invalid_tool_message",
            0,
        ),
        ([("tool", "normal", [result("nope")])], {"x": "r"}, "unknown_tool_call", 0),
        # Answering the same call twice in one batch.
        (
            [("tool", "normal", [result("x")]), ("tool", "normal", [result("x")])],
            {"x": "r"},
            "duplicate_tool_result",
            1,
        ),
        ([("assistant", "normal", [call("x")])], {"x": "r"}, "duplicate_tool_call_id", 0),
        ([("assistant", "normal", [call("d"), call("d")])], {}, "duplicate_tool_call_id", 0),
        ([("assistant", "normal", [call("x"), *TEXT])], {}, "invalid_block_order", 0),
        ([("user", "normal", [call("x")])], {}, "invalid_block", 0),
        ([("assistant", "world_state", TEXT)], {}, "invalid_kind", 0),
    ],
)
def test_each_rule_names_the_message(
    batch: Any, unresolved: dict[str, str], code: str, index: int
) -> None:
    with pytest.raises(ServiceError) as caught:
        check_append(batch, unresolved)
    assert caught.value.code == code
    assert caught.value.extra["index"] == index
    assert f"message {index}" in caught.value.detail


def test_a_resolved_call_id_may_be_reused() -> None:
    # Only a duplicate of an *unresolved* call is refused (spec §5).
    plan = check_append(
        [("tool", "normal", [result("x")]), ("assistant", "normal", [call("x")])], {"x": "r"}
    )
    assert plan.messages[1].opened_calls == (("x", "read"),)
