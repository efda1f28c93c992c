from __future__ import annotations

import pytest

from app.core.compaction.checkpoint import Checkpoint, LastUserRequest
from app.core.compaction.replay import (
    CompactionSelector,
    LatestSelector,
    ThroughMessageSelector,
    checkpoint_installed_through,
    parse_replay_selector,
    replay_through_message,
)
from app.core.content import SyntheticOrigin, text_block
from app.core.errors import InvalidInput
from tests.core.factories import user


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("latest", LatestSelector()),
        ("compaction:compaction-abc", CompactionSelector("compaction-abc")),
        ("compaction:a:b", CompactionSelector("a:b")),
        ("through_message:0", ThroughMessageSelector(0)),
        ("through_message:42", ThroughMessageSelector(42)),
        (f"through_message:{2**63 - 1}", ThroughMessageSelector(2**63 - 1)),
    ],
)
def test_valid_selectors(text: str, expected: object) -> None:
    assert parse_replay_selector(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Latest",
        "latest:",
        "compaction:",
        "compaction: x",
        "through_message:",
        "through_message:-1",
        "through_message:+1",
        "through_message:1_000",
        "through_message:1.5",
        "through_message:٣",
        # Past the store's 64-bit sequences: the database would fail, not match nothing.
        f"through_message:{2**63}",
        f"through_message:{10**299}",
        "checkpoint:1",
    ],
)
def test_bad_selectors(text: str) -> None:
    with pytest.raises(InvalidInput) as info:
        parse_replay_selector(text)
    assert info.value.code == "invalid_selector"


def cp(cid: str, seq: int, installed: int) -> Checkpoint:
    return Checkpoint(
        compaction_id=cid,
        sequence=seq,
        kind="manual",
        summary="S",
        runtime_reminder="R",
        last_user=LastUserRequest("m1", 1, [text_block("q")]),
        through_message_sequence=min(installed, 4),
        replaced_through_message_sequence=installed,
    )


def test_checkpoint_installed_through_picks_latest_boundary_then_newest_row() -> None:
    cps = [cp("a", 1, 4), cp("b", 2, 8), cp("rewind", 3, 8)]
    assert checkpoint_installed_through(cps, 3) is None
    assert checkpoint_installed_through(cps, 4) == cps[0]
    assert checkpoint_installed_through(cps, 7) == cps[0]
    assert checkpoint_installed_through(cps, 8) == cps[2]


def test_replay_through_message() -> None:
    messages = [user(f"u{n}", mid=f"m{n}", seq=n) for n in range(1, 11)]
    assert [m.sequence for m in replay_through_message([], messages, 3)] == [1, 2, 3]
    items = replay_through_message([cp("a", 1, 4)], messages, 6)
    assert [i.origin for i in items[:3]] == [
        SyntheticOrigin("a", "last_user_request_replay", "m1", 1),
        SyntheticOrigin("a", "compaction_summary"),
        SyntheticOrigin("a", "system_reminder"),
    ]
    assert [i.sequence for i in items[3:]] == [5, 6]
