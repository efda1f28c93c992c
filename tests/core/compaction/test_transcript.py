from __future__ import annotations

import json
from typing import Any

import pytest

from app.core.compaction.checkpoint import Checkpoint, LastUserRequest, compacted_projection
from app.core.compaction.transcript import (
    CONVERSATION_HISTORY_TOOL,
    HistoryArgumentsInvalid,
    TranscriptQuery,
    compaction_not_found,
    parse_conversation_history_arguments,
    render_transcript_page,
    transcript_page,
)
from app.core.content import Item, RealOrigin
from app.core.errors import InvalidInput
from tests.core.compaction.items import change, tool_with
from tests.core.factories import user

BOUNDARY = 23


def checkpoint() -> Checkpoint:
    return Checkpoint(
        compaction_id="c1",
        sequence=1,
        kind="manual",
        summary="S",
        runtime_reminder="R",
        last_user=LastUserRequest("m1", 1, [{"type": "text", "text": "q"}]),
        through_message_sequence=BOUNDARY,
        replaced_through_message_sequence=BOUNDARY,
    )


def stored(n: int = 30) -> list[Item]:
    return [user(f"message {i}", mid=f"m{i}", seq=i) for i in range(1, n + 1)]


def all_pages(messages: list[Item], limit: int) -> list[list[int]]:
    pages: list[list[int]] = []
    after = 0
    while True:
        page = transcript_page(checkpoint(), messages, TranscriptQuery(None, after, limit))
        pages.append([m.sequence or 0 for m in page.messages])
        if not page.has_more:
            assert page.next_after_sequence is None
            return pages
        assert page.next_after_sequence == pages[-1][-1]
        after = page.next_after_sequence


@pytest.mark.parametrize("limit", [1, 5, 20, 22, 23, 24, 50])
def test_pages_completely_and_never_past_the_fact_boundary(limit: int) -> None:
    pages = all_pages(stored(), limit)
    flat = [s for page in pages for s in page]
    assert flat == list(range(1, BOUNDARY + 1))
    assert all(len(page) <= limit for page in pages)


def test_page_excludes_synthetic_items() -> None:
    projection = compacted_projection(checkpoint(), stored()[BOUNDARY:])
    mixed = [*projection, *stored()]
    page = transcript_page(checkpoint(), mixed, TranscriptQuery(limit=50))
    assert all(isinstance(m.origin, RealOrigin) for m in page.messages)
    assert [m.sequence for m in page.messages] == list(range(1, BOUNDARY + 1))


def test_exactly_limit_left_has_no_more() -> None:
    page = transcript_page(checkpoint(), stored(), TranscriptQuery(None, BOUNDARY - 3, 3))
    assert [m.sequence for m in page.messages] == [21, 22, 23]
    assert (page.has_more, page.next_after_sequence) == (False, None)


def test_after_the_boundary_is_an_empty_page() -> None:
    page = transcript_page(checkpoint(), stored(), TranscriptQuery(None, 100, 20))
    assert page.messages == []
    assert not page.has_more
    assert page.through_message_sequence == BOUNDARY


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"after_sequence": -1}, "invalid_after_sequence"),
        ({"limit": 0}, "invalid_limit"),
        ({"limit": 51}, "invalid_limit"),
        ({"limit": True}, "invalid_limit"),
        ({"compaction_id": " "}, "invalid_compaction_id"),
    ],
)
def test_query_bounds(kwargs: dict[str, Any], code: str) -> None:
    with pytest.raises(InvalidInput) as info:
        TranscriptQuery(**kwargs)
    assert info.value.code == code


def test_query_accepts_the_edges() -> None:
    assert TranscriptQuery(after_sequence=0, limit=1).limit == 1
    assert TranscriptQuery(limit=50).limit == 50
    assert TranscriptQuery() == TranscriptQuery(None, 0, 20)


def test_tool_arguments() -> None:
    parsed = parse_conversation_history_arguments(
        '{"compactionId":"c1","afterSequence":5,"limit":50}'
    )
    assert parsed == TranscriptQuery("c1", 5, 50)
    assert parse_conversation_history_arguments({}) == TranscriptQuery()


@pytest.mark.parametrize(
    "arguments",
    [
        "{",
        "[]",
        {"after_sequence": 1},
        {"afterSequence": -1},
        {"afterSequence": "1"},
        {"limit": 51},
        {"limit": 0},
        {"limit": 2.0},
        {"compactionId": 3},
    ],
)
def test_bad_tool_arguments_are_invalid_arguments(arguments: Any) -> None:
    with pytest.raises(HistoryArgumentsInvalid) as info:
        parse_conversation_history_arguments(arguments)
    assert info.value.code == "invalid_arguments"


def test_rendered_page_is_camel_case_json_without_artifacts() -> None:
    messages: list[Item] = [user("héllo", mid="m1", seq=1), tool_with(change("a.py"), seq=2)]
    page = transcript_page(checkpoint(), messages, TranscriptQuery(limit=1))
    text = render_transcript_page(page)
    assert "héllo" in text  # non-ASCII written as itself
    data = json.loads(text)
    assert list(data) == [
        "compactionId",
        "throughMessageSequence",
        "messages",
        "hasMore",
        "nextAfterSequence",
    ]
    assert data["messages"] == [
        {
            "id": "m1",
            "sequence": 1,
            "role": "user",
            "kind": "normal",
            "content": [{"type": "text", "text": "héllo"}],
        }
    ]
    assert (data["hasMore"], data["nextAfterSequence"]) == (True, 1)
    second = transcript_page(checkpoint(), messages, TranscriptQuery(None, 1, 1))
    assert "artifacts" not in render_transcript_page(second)


def test_tool_definition() -> None:
    assert CONVERSATION_HISTORY_TOOL["name"] == "conversation_history"
    description = CONVERSATION_HISTORY_TOOL["description"]
    assert "Omit compactionId" in description
    assert "nextAfterSequence while hasMore" in description
    schema = CONVERSATION_HISTORY_TOOL["input_schema"]
    assert set(schema["properties"]) == {"compactionId", "afterSequence", "limit"}
    assert schema["properties"]["limit"]["maximum"] == 50
    assert schema["additionalProperties"] is False


def test_not_found_errors() -> None:
    assert compaction_not_found(None).code == "compaction_not_found"
    assert "c9" in compaction_not_found("c9").detail
