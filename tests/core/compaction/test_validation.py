from __future__ import annotations

from collections.abc import Callable

import pytest

from app.core.compaction.request import SUMMARY_HEADINGS, SUMMARY_ROOT_CLOSE, SUMMARY_ROOT_OPEN
from app.core.compaction.validation import (
    CONTROL_TAGS,
    MIN_SUMMARY_CHARS,
    SummaryInvalid,
    validate_summary,
)
from tests.core.compaction.summaries import FILLER, summary, summary_of_length


def check(text: str, *, finish_reason: str = "stop", has_tool_calls: bool = False) -> str:
    return validate_summary(text, finish_reason=finish_reason, has_tool_calls=has_tool_calls)


def reason_of(text: str, **kwargs: object) -> str:
    with pytest.raises(SummaryInvalid) as info:
        check(text, **kwargs)  # type: ignore[arg-type]
    assert info.value.code == "invalid_summary"
    assert info.value.classification == "degenerate"
    assert info.value.extra["classification"] == "degenerate"
    return info.value.reason


def test_valid_summary_is_returned_root_through_closing_tag() -> None:
    text = summary()
    assert check(text) == text


def test_text_before_the_root_is_dropped_and_trailing_whitespace_ignored() -> None:
    text = summary()
    assert check(f"Here is the summary:\n\n{text}\n  \n") == text


def test_a_tool_call_is_refused_even_with_a_valid_text() -> None:
    assert reason_of(summary(), has_tool_calls=True) == "the response requested a tool call"


@pytest.mark.parametrize("finish_reason", ["length", "tool_calls", "content_filter", ""])
def test_finish_reason_other_than_stop_is_refused(finish_reason: str) -> None:
    assert reason_of(summary(), finish_reason=finish_reason) == f"finish reason was {finish_reason}"


def test_missing_root() -> None:
    assert reason_of(FILLER * 10) == "missing conversation_summary root"


def test_root_with_another_format_version_is_missing_root() -> None:
    text = summary().replace('format_version="1"', 'format_version="2"')
    assert reason_of(text) == "missing conversation_summary root"


def test_two_roots_are_refused() -> None:
    assert (
        reason_of(summary() + "\n" + summary()) == "conversation_summary must have exactly one root"
    )


def test_missing_closing_tag_is_refused() -> None:
    text = summary().removesuffix(SUMMARY_ROOT_CLOSE)
    assert reason_of(text) == "conversation_summary must have exactly one root"


def test_text_after_the_closing_tag_is_refused() -> None:
    reason = reason_of(summary() + "\nThanks!")
    assert reason == "unexpected content after conversation_summary root"


@pytest.mark.parametrize("tag", CONTROL_TAGS)
@pytest.mark.parametrize("case", [str.lower, str.upper, str.title])
def test_control_tags_inside_are_refused_in_any_case(tag: str, case: Callable[[str], str]) -> None:
    bodies = [FILLER] * 9
    bodies[3] = f"{FILLER} {case(tag)}> injected"
    reason = reason_of(summary(bodies=bodies))
    if case(tag) == "</conversation_summary":
        # The exact closing tag a second time is a second root.
        assert reason == "conversation_summary must have exactly one root"
    else:
        reported = reason.removeprefix("summary contained forbidden control tag ")
        assert reported != reason
        assert tag.startswith(reported)  # ``<system_reminder`` is reported as ``<system``


def test_every_spec_tag_and_closing_form_is_listed() -> None:
    names = ["conversation_summary", "system", "developer", "instructions", "system_reminder"]
    names += ["tool", "assistant", "user_query"]
    for name in names:
        assert f"<{name}" in CONTROL_TAGS
        assert f"</{name}" in CONTROL_TAGS


def test_a_harmless_angle_bracket_is_fine() -> None:
    bodies = [FILLER] * 9
    bodies[2] = "Compared a < b and used <br> and <toolkit-free> text"  # <tool prefix!
    # ``<toolkit`` starts with ``<tool``: prefix matching is the rule, so this is refused.
    assert "forbidden control tag <tool" in reason_of(summary(bodies=bodies))
    bodies[2] = "Compared a < b and used <br> in the template"
    assert check(summary(bodies=bodies))


@pytest.mark.parametrize("index", range(9))
def test_each_missing_heading_is_refused(index: int) -> None:
    headings = [h for i, h in enumerate(SUMMARY_HEADINGS) if i != index]
    reason = reason_of(summary(headings))
    if index == 8:
        assert reason == "summary contained 8 of 9 required headings"
    else:
        assert reason.endswith(f"expected: {SUMMARY_HEADINGS[index]}")


@pytest.mark.parametrize("index", range(9))
def test_each_duplicated_heading_is_refused(index: int) -> None:
    headings = list(SUMMARY_HEADINGS)
    headings.insert(index + 1, SUMMARY_HEADINGS[index])
    reason = reason_of(summary(headings))
    assert "out of order" in reason or "more than nine headings" in reason


@pytest.mark.parametrize("index", range(9))
def test_each_heading_out_of_order_is_refused(index: int) -> None:
    headings = list(SUMMARY_HEADINGS)
    other = (index + 1) % 9
    headings[index], headings[other] = headings[other], headings[index]
    assert "out of order" in reason_of(summary(headings))


def test_an_unknown_heading_is_refused() -> None:
    bodies = [FILLER] * 9
    bodies[4] = f"{FILLER}\n## Extra notes\nmore"
    assert "out of order" in reason_of(summary(bodies=bodies))


def test_a_tenth_heading_is_refused() -> None:
    bodies = [FILLER] * 9
    bodies[8] = f"{FILLER}\n## 10. Extra"
    assert reason_of(summary(bodies=bodies)) == "summary contained more than nine headings"


def test_content_before_the_first_heading_is_refused() -> None:
    text = summary().replace(SUMMARY_ROOT_OPEN, SUMMARY_ROOT_OPEN + "\nPreface", 1)
    assert reason_of(text) == "summary contained content before the first heading"


def test_indented_headings_and_deeper_subheadings_are_fine() -> None:
    bodies = [f"### Detail\n{FILLER}"] * 9
    text = summary(bodies=bodies).replace("\n## 3.", "\n   ## 3.")
    assert check(text) == text


@pytest.mark.parametrize("index", range(9))
def test_an_empty_section_is_refused_but_none_counts(index: int) -> None:
    bodies = [FILLER] * 9
    bodies[index] = "   "
    assert reason_of(summary(bodies=bodies)) == (
        f"summary section had no content: {SUMMARY_HEADINGS[index]}"
    )
    bodies[index] = "None"
    assert check(summary(bodies=bodies))


def test_length_boundary_500_characters() -> None:
    assert len(check(summary_of_length(MIN_SUMMARY_CHARS))) == MIN_SUMMARY_CHARS
    reason = reason_of(summary_of_length(MIN_SUMMARY_CHARS - 1))
    assert reason == "summary was shorter than 500 characters"


def test_length_counts_characters_not_bytes() -> None:
    text = summary_of_length(MIN_SUMMARY_CHARS, pad="é")
    assert len(text.encode()) > MIN_SUMMARY_CHARS
    assert check(text) == text


def test_text_before_the_root_does_not_count_toward_the_length() -> None:
    short = summary_of_length(MIN_SUMMARY_CHARS - 1)
    assert "shorter" in reason_of("x" * 1000 + short)


def test_error_detail_tells_what_to_do() -> None:
    with pytest.raises(SummaryInvalid) as info:
        check("nothing")
    assert "nine headings" in info.value.detail
