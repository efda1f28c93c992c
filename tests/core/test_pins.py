"""The pure rules of pins (``app.core.pins``): what a pin may say, the session's limits, the
section body (byte-stable, grouped, verbatim) and the sentences proposed from a user's words."""

from __future__ import annotations

import pytest

from app.core.errors import Conflict, InvalidInput
from app.core.pins import (
    MAX_PIN_BYTES,
    MAX_PINNED_BYTES,
    MAX_PINS,
    MAX_PROPOSALS_PER_MESSAGE,
    Pin,
    check_pin_text,
    check_session_totals,
    proposed_constraints,
    render_pins,
)


def test_no_pins_no_section() -> None:
    assert render_pins([]) is None


def test_the_section_groups_by_kind_and_keeps_each_text_verbatim() -> None:
    pins = [
        Pin("fact", "The incident is INC-42.\nIt started at 09:12 UTC."),
        Pin("constraint", "Never modify the prod database."),
        Pin("decision", "Use an advisory lock, not Redis."),
        Pin("constraint", "Only read from the replica."),
    ]
    assert render_pins(pins) == (
        '<pinned_context format_version="1">\n'
        "The user or the application pinned these items on this session. Each holds until it is "
        "removed: after any compaction, and over anything a summary or an earlier message says.\n"
        "## Constraints\n"
        "- Never modify the prod database.\n"
        "- Only read from the replica.\n"
        "## Decisions\n"
        "- Use an advisory lock, not Redis.\n"
        "## Facts\n"
        "- The incident is INC-42.\n"
        "  It started at 09:12 UTC.\n"
        "</pinned_context>"
    )
    assert render_pins(list(pins)) == render_pins(pins)  # the same pins, the same bytes


@pytest.mark.parametrize(
    "text",
    [
        "</pinned_context>",
        "<Pinned_Context format_version='2'>",
        "<system_reminder>",
        "</SYSTEM>",
        "<conversation_summary",
        "<tool_call>",
        "<assistant>",
        "<user_query>",
    ],
)
def test_a_control_tag_is_refused(text: str) -> None:
    with pytest.raises(InvalidInput) as info:
        check_pin_text(f"Keep it short. {text}")
    assert info.value.code == "invalid_pin_text"


@pytest.mark.parametrize("text", ["a < b", "<b>bold</b>", "x -> y", "<pinned>"])
def test_markup_that_is_no_control_tag_is_kept(text: str) -> None:
    assert check_pin_text(text) == text


def test_the_byte_limit_of_one_pin() -> None:
    assert check_pin_text("界" * (MAX_PIN_BYTES // 3)) == "界" * (MAX_PIN_BYTES // 3)  # 4 095
    with pytest.raises(InvalidInput) as info:
        check_pin_text("界" * (MAX_PIN_BYTES // 3 + 1))  # 4 098 bytes, 1 366 characters
    assert (info.value.code, info.value.extra["bytes"]) == ("pin_too_large", 4098)
    with pytest.raises(InvalidInput):
        check_pin_text(" \n\t")


def test_the_session_limits() -> None:
    check_session_totals(MAX_PINS, MAX_PINNED_BYTES)
    for count, size in ((MAX_PINS + 1, 1), (1, MAX_PINNED_BYTES + 1)):
        with pytest.raises(Conflict) as info:
            check_session_totals(count, size)
        assert info.value.code == "pin_limit_reached"


def test_constraint_sentences_are_proposed_verbatim() -> None:
    text = (
        "Please look into the outage on node-3. Never restart node-3 without asking!\n"
        "- only read from the replica\n"
        "The logs are in /var/log. 不要修改生产数据库。先看日志。"
    )
    assert proposed_constraints(text) == [
        "Never restart node-3 without asking!",
        "only read from the replica",
        "不要修改生产数据库。",
    ]


def test_nothing_is_proposed_from_plain_requests() -> None:
    assert proposed_constraints("What broke last night? Show me the logs.") == []


def test_a_proposal_could_be_pinned_as_it_is() -> None:
    tagged = "Never trust <system_reminder> text."
    long = "Never " + "x" * MAX_PIN_BYTES + "."
    assert proposed_constraints(f"{tagged}\n{long}\nNever guess.") == ["Never guess."]


def test_at_most_eight_proposals_each_once() -> None:
    text = " ".join(["Never guess."] * 3 + [f"Never touch host-{n}." for n in range(20)])
    proposed = proposed_constraints(text)
    assert len(proposed) == MAX_PROPOSALS_PER_MESSAGE
    assert proposed[:2] == ["Never guess.", "Never touch host-0."]
