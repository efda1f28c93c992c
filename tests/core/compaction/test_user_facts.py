"""What a caller's summary must keep of the user's facts of the summary it replaces."""

from __future__ import annotations

import pytest

from app.core.compaction.user_facts import UserFacts, dropped_user_facts, user_facts_of
from tests.core.compaction.summaries import summary

PREVIOUS = summary(
    bodies=[
        "- Latest user request: Diagnose INC-42 on the payments cluster. "
        "Never delete or modify anything in prod.",
        "- Identifiers: INC-42, PAY-7731",
        "None",
        "None",
        "- Compactions so far: 1",
        "- 工单PAY-7731：注意不要修改 migration 文件。\n- Check shard 3.",
        "None",
        "None",
        "- Continue answering the latest user request quoted above.",
    ]
)


def test_the_user_facts_of_a_summary() -> None:
    facts = user_facts_of(PREVIOUS)
    assert facts.identifiers == ("INC-42", "PAY-7731")
    assert facts.constraints == (
        "Never delete or modify anything in prod.",
        "工单PAY-7731：注意不要修改 migration 文件。",
    )


@pytest.mark.parametrize(
    ("text", "dropped"),
    [
        ("INC-42 PAY-7731", ()),
        ("INC-420 PAY-7731", ("INC-42",)),  # a whole token only
        ("INC-43 and PAY-77310", ("INC-42", "PAY-7731")),
    ],
)
def test_identifiers_are_whole_tokens(text: str, dropped: tuple[str, ...]) -> None:
    facts = UserFacts(("INC-42", "PAY-7731"), ())
    assert dropped_user_facts(text, facts).identifiers == dropped


CONSTRAINT = "Never delete or modify anything in prod."  # never delete modify anything prod


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("never modify prod", True),  # 3 of 5 content words
        ("never delete, read-only", False),  # 2 of 5: under half
        ("never delete anything", True),  # 3 of 5
        ("the read-only rule was lifted; deploy to production", False),
    ],
)
def test_a_constraint_is_kept_by_half_its_words(text: str, kept: bool) -> None:
    dropped = dropped_user_facts(text, UserFacts((), (CONSTRAINT,)))
    assert (dropped.constraints == ()) is kept


def test_a_chinese_constraint_is_kept_by_half_its_character_pairs() -> None:
    facts = UserFacts((), ("注意不要修改 migration 文件。",))
    assert dropped_user_facts("约束：不要修改 migration 文件", facts).constraints == ()
    assert dropped_user_facts("可以修改数据库", facts).constraints != ()
