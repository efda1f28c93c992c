"""The bounded view a summary request sends when spec §7.3's own does not fit."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from app.core.compaction.request import SUMMARY_INSTRUCTION, summary_request_conversation
from app.core.compaction.summary_view import (
    fit_summary_request,
    project_for_summary,
    summary_item_bytes,
)
from app.core.content import Item, text_block
from app.core.counting import ESTIMATE
from tests.core.compaction.items import synthetic
from tests.core.factories import assistant, call, data_block, tool, user


def size(items: Sequence[Item]) -> int:
    return sum(ESTIMATE.measure_content(i.content) for i in items)


def fitting(budget: int) -> tuple[list[int], Callable[[list[Item]], bool]]:
    """A ``fits`` over item bytes that records every size it was asked about."""
    asked: list[int] = []

    def fits(view: list[Item]) -> bool:
        asked.append(size(view))
        return size(view) <= budget

    return asked, fits


def texts(view: Sequence[Item]) -> list[str]:
    return [b["text"] for i in view for b in i.content if b["type"] == "text"]


def test_a_request_that_fits_is_spec_7_3s_own() -> None:
    items = [user("Fix the parser.", seq=1), assistant("Done.", seq=2)]
    _, fits = fitting(10_000)
    view = fit_summary_request(items, list, fits, item_bytes=1000)
    assert view == summary_request_conversation(items)
    assert view[0] is items[0]
    assert view[1] is items[1]


def test_an_oversized_item_is_cut_around_a_marker_and_the_others_are_kept() -> None:
    huge = "head " + "x" * 50_000 + " tail"
    items = [user("Fix the parser.", seq=1), user(huge, seq=2), assistant("Done.", seq=3)]
    _, fits = fitting(3_000)
    view = fit_summary_request(items, list, fits, item_bytes=1_000)
    assert view[0] is items[0]
    assert view[2] is items[2]
    cut = view[1].content[0]["text"]
    assert cut.startswith("head ")
    assert cut.endswith(" tail")
    assert "[cut for the summary: " in cut
    assert "the transcript keeps this message in full" in cut
    assert ESTIMATE.measure_content(view[1].content) <= 1_000 + 30  # the JSON around the text
    assert (view[1].origin, view[1].kind) == (items[1].origin, items[1].kind)
    assert texts(view)[-1] == SUMMARY_INSTRUCTION


def test_the_oldest_messages_go_first_and_the_checkpoint_items_stay() -> None:
    head = [
        synthetic("Fix the parser.", "last_user_request_replay"),
        synthetic("<summary>", "compaction_summary"),
        synthetic("<reminder>", "system_reminder"),
    ]
    tail: list[Item] = []
    for n in range(1, 40, 3):
        tail += [
            assistant("", call(f"c{n}"), seq=n),
            tool(f"c{n}", "r" * 200, seq=n + 1),
            user(f"step {n}", seq=n + 2),
        ]
    asked, fits = fitting(2_500)
    view = fit_summary_request([*head, *tail], list, fits, item_bytes=1_000)
    assert view[:3] == head
    kept = view[3:-1]
    assert kept == tail[len(tail) - len(kept) :]  # a suffix of the messages, in order
    assert kept[0].role != "tool"  # a call is never dropped from its results
    assert size(view) <= 2_500
    # One more message would not have fitted: the most that fits is kept.
    earlier = [i for i in range(len(tail) - len(kept)) if tail[i].role != "tool"][-1]
    assert size([*head, *tail[earlier:], view[-1]]) > 2_500
    assert len(asked) < 12  # bisected, not tried one by one


def test_when_nothing_fits_the_smallest_view_is_returned() -> None:
    head = [synthetic("Fix the parser.", "last_user_request_replay")]
    _, fits = fitting(10)
    view = fit_summary_request(
        [*head, user("a", seq=1), user("b", seq=2)],
        list,
        fits,
        item_bytes=1_000,
    )
    assert view == [*head, summary_request_conversation([])[0]]


def test_a_cut_item_keeps_its_calls_results_and_a_note_of_its_data() -> None:
    arguments = json.dumps({"path": "a" * 20_000})
    calling = Item(
        "assistant",
        "normal",
        [
            {"type": "thinking", "thinking": "t" * 20_000},
            text_block("I will read it."),
            {"type": "provider_opaque", "driver": "x", "kind": "y", "payload": {"k": "v"}},
            call("c1", "read", arguments),
        ],
    )
    cut = project_for_summary(calling, 2_000)
    assert [b["type"] for b in cut.content] == ["text", "tool_call"]
    call_block = cut.content[1]
    assert call_block["type"] == "tool_call"
    assert call_block["id"] == "c1"
    assert set(json.loads(call_block["input"])) == {"arguments_cut_for_summary"}
    result = project_for_summary(tool("c1", "r" * 20_000, data_block()), 2_000)
    output = result.content[0]["output"]
    assert len(output) == 1
    assert "data block(s) of about" in output[0]["text"]
    small = user("short")
    assert project_for_summary(small, 2_000) is small


def test_an_items_share_follows_the_summary_models_input() -> None:
    assert summary_item_bytes(1_000_000) == 32_000  # the 8 000 tokens of spec §2.2
    assert summary_item_bytes(8_000) == 4_000  # an eighth of the input
    assert summary_item_bytes(100) == 256  # never under 64 tokens
