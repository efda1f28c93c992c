"""The ``local`` summarizer's ranking of what it keeps (spec §9): a long message keeps a red line
with the example it points back to, CJK paragraphs are cut between sentences, and an
instruction replaced in the same window is marked."""

from __future__ import annotations

from app.core.compaction._local_text import shorten
from app.core.compaction.local import MAX_REQUEST_CHARS, local_summary
from app.core.compaction.request import summary_request_conversation
from tests.core.factories import user

XFF = (
    "Last time someone decided to trust the X-Forwarded-For header blindly. It blew up in "
    "production. So — let's not do that this time."
)


def test_a_long_message_keeps_a_red_line_with_the_example_it_points_back_to() -> None:
    filler = "We looked at many graphs and the dashboards were mostly green. " * 10
    shortened = shorten(f"{filler}{XFF} {filler}", MAX_REQUEST_CHARS)
    assert XFF in shortened
    assert len(shortened) <= MAX_REQUEST_CHARS + 2


def test_a_red_line_whose_example_does_not_fit_keeps_the_red_line() -> None:
    example = "Last time someone " + "really " * 80 + "trusted the header."
    shortened = shorten(f"{example} So, let's not do that again.", 200)
    assert shortened == "… So, let's not do that again."


def test_a_chinese_paragraph_is_cut_between_sentences() -> None:
    filler = "我们看了很多监控图表，大部分指标都正常。" * 30
    shortened = shorten(f"{filler}注意：不要修改 migration 目录。{filler}", MAX_REQUEST_CHARS)
    assert "注意：不要修改 migration 目录。" in shortened
    assert "more characters" not in shortened


def test_an_instruction_replaced_in_the_same_window_is_marked_and_ranked_as_filler() -> None:
    conversation = [
        user("Add rate limiting."),
        user("Use a sliding window counter in limits.py."),
        user("Actually — scratch that. Instead, let's do a token bucket."),
    ]
    summary = local_summary(summary_request_conversation(conversation))
    assert "- [replaced by a later request] Use a sliding window counter in limits.py.\n" in summary
    assert "- Actually — scratch that. Instead, let's do a token bucket.\n" in summary


def test_the_first_request_once_replaced_is_marked_too() -> None:
    conversation = [
        user("Use Redis for the lock."),
        user("ok"),
        user("Redis 那个方案算了…换成 advisory lock 吧"),
    ]
    summary = local_summary(summary_request_conversation(conversation))
    assert "- First user request: [replaced by a later request] Use Redis for the lock.\n" in (
        summary
    )
