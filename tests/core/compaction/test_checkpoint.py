from __future__ import annotations

import pytest

from app.core.compaction.checkpoint import (
    SUMMARY_PREAMBLE,
    Checkpoint,
    LastUserRequest,
    compacted_projection,
    install_tail,
    rewind_checkpoint,
    select_last_user_request,
)
from app.core.compaction.shrink import refusal_of
from app.core.content import Item, SyntheticOrigin, text_block
from app.core.errors import Conflict, InvalidInput
from tests.core.compaction.items import synthetic
from tests.core.factories import assistant, user

REMINDER = '<system_reminder format_version="1">\nNo additional durable runtime state was recorded at compaction time.\n</system_reminder>'  # noqa: E501


def checkpoint(items: list[Item], cid: str = "c1", through: int = 6) -> Checkpoint:
    return Checkpoint(
        compaction_id=cid,
        sequence=1,
        kind="manual",
        summary="  <conversation_summary ...>  \n",
        runtime_reminder=REMINDER,
        last_user=select_last_user_request(items),
        through_message_sequence=through,
        replaced_through_message_sequence=through,
    )


def conversation() -> list[Item]:
    return [
        user("first request", mid="m1", seq=1),
        assistant("ok", mid="m2", seq=2),
        user("<skill>body</skill>", kind="skill_instruction", mid="m3", seq=3),
        user("the real request", mid="m4", seq=4),
        user("<agent_message>..</agent_message>", kind="agent_message", mid="m5", seq=5),
        user("<sandbox_policy>..", kind="world_state", mid="m6", seq=6),
    ]


def test_last_user_skips_contextual_messages() -> None:
    found = select_last_user_request(conversation())
    assert found == LastUserRequest("m4", 4, [text_block("the real request")])


def test_never_picks_summary_or_reminder_items() -> None:
    items = [
        *conversation(),
        synthetic("summary text", "compaction_summary"),
        synthetic(REMINDER, "system_reminder"),
    ]
    assert select_last_user_request(items).message_id == "m4"


def test_projection_items_and_order() -> None:
    cp = checkpoint(conversation())
    tail = [user("new", mid="m7", seq=7)]
    items = compacted_projection(cp, tail)
    assert [i.role for i in items] == ["user"] * 4
    assert [i.kind for i in items[:3]] == ["normal"] * 3
    assert items[0].content == [text_block("the real request")]
    assert items[0].origin == SyntheticOrigin("c1", "last_user_request_replay", "m4", 4)
    assert items[1].content == [text_block(SUMMARY_PREAMBLE + "<conversation_summary ...>")]
    assert items[1].origin == SyntheticOrigin("c1", "compaction_summary")
    assert items[2].content == [text_block(REMINDER)]
    assert items[2].origin == SyntheticOrigin("c1", "system_reminder")
    assert items[3] is tail[0]


def test_preamble_is_exact() -> None:
    assert SUMMARY_PREAMBLE == (
        "The earlier Conversation was compacted into the following continuation summary. Treat "
        "it as prior conversation context, preserve its uncertainty, and continue from it:\n\n"
    )


def test_second_compaction_replays_the_same_request() -> None:
    first = compacted_projection(checkpoint(conversation()), [assistant("answer", seq=7)])
    # Nothing new from the user: the replay item is the last request, not summary/reminder.
    again = select_last_user_request(first)
    assert again == LastUserRequest("m4", 4, [text_block("the real request")])
    second = compacted_projection(checkpoint(first, cid="c2"), [])
    assert second[0].origin == SyntheticOrigin("c2", "last_user_request_replay", "m4", 4)


def test_a_newer_real_request_wins_over_the_replay() -> None:
    first = compacted_projection(checkpoint(conversation()), [user("newer", mid="m9", seq=9)])
    assert select_last_user_request(first).message_id == "m9"


@pytest.mark.parametrize(
    "items",
    [
        [],
        [assistant("hi", seq=1)],
        [user("<skill>", kind="skill_instruction", seq=1), user("ws", kind="world_state", seq=2)],
        [synthetic("s", "compaction_summary"), synthetic("r", "system_reminder")],
        [Item("user", "normal", [], synthetic("x", "compaction_summary").origin)],
    ],
)
def test_missing_last_user(items: list[Item]) -> None:
    with pytest.raises(Conflict) as info:
        select_last_user_request(items)
    assert info.value.code == "missing_last_user"


def test_an_empty_last_request_is_missing_last_user() -> None:
    items = [user("earlier", seq=1), Item("user", "normal", [], user("", seq=2).origin)]
    with pytest.raises(Conflict):
        select_last_user_request(items)


def test_install_tail_is_what_follows_the_install_boundary() -> None:
    cp = checkpoint(conversation(), through=4)
    messages = [*conversation(), user("later", mid="m7", seq=7)]
    assert [m.sequence for m in install_tail(list(reversed(messages)), cp)] == [5, 6, 7]


def test_rewind_copies_summary_and_fact_boundary_and_hides_the_tail() -> None:
    target = checkpoint(conversation(), through=6)
    rewound = rewind_checkpoint(
        target, compaction_id="c9", sequence=3, current_max_sequence=12, runtime_reminder="r"
    )
    assert rewound.kind == "rewind"
    assert rewound.parent_compaction_id == "c1"
    assert (rewound.summary, rewound.last_user) == (target.summary, target.last_user)
    assert rewound.through_message_sequence == 6
    assert rewound.replaced_through_message_sequence == 12
    messages = [*conversation(), *(user(f"tail {n}", seq=n) for n in range(7, 13))]
    projection = compacted_projection(rewound, install_tail(messages, rewound))
    assert len(projection) == 3  # the abandoned tail 7..12 is hidden, not deleted
    assert len(messages) == 12


def test_rewind_boundary_before_the_fact_boundary_is_refused() -> None:
    with pytest.raises(InvalidInput):
        rewind_checkpoint(
            checkpoint(conversation(), through=6),
            compaction_id="c9",
            sequence=2,
            current_max_sequence=5,
            runtime_reminder="r",
        )


@pytest.mark.parametrize(
    ("kind", "allow_larger", "before", "after", "refused"),
    [
        ("manual", False, 100, 100, True),  # equal: not smaller
        ("manual", False, 100, 99, False),  # one under: installed
        ("manual", True, 100, 400, False),  # asked for
        ("threshold", True, 100, 100, True),  # in a turn: never
        ("overflow", False, 100, 101, True),
        ("rewind", False, 100, 400, False),  # reinstalls as asked
    ],
)
def test_which_compaction_that_would_not_shrink_is_refused(
    kind: str, allow_larger: bool, before: int, after: int, refused: bool
) -> None:
    result = refusal_of(kind, before, after, allow_larger=allow_larger)
    assert (result is not None) == refused
    if result is not None:
        assert result.code == "compaction_not_smaller"
        assert ("allow_larger" in result.detail) == (kind == "manual")
