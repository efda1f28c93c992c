"""Marks of each prepared message: which stage changed it (the context map shows them)."""

from __future__ import annotations

from app.core.capabilities import ModelCapabilities
from app.core.content import Item, RealOrigin, SyntheticOrigin, text_block
from app.core.pipeline.context_map_marks import message_marks
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import PruningWatermark
from tests.core.factories import assistant, call, data_block, tool, user


def marks_of(items: list[Item], watermark: PruningWatermark, **caps: bool) -> list[tuple[str, ...]]:
    prepared = prepare([], items, [], ModelCapabilities(1_000_000, 4000, **caps), watermark)
    return message_marks(prepared.items, items, watermark)


def test_each_stage_marks_what_it_changed_and_nothing_else() -> None:
    items = [
        user("go", mid="m1", seq=1),
        assistant("", call("c1"), call("c2"), call("c3"), call("c4"), mid="m2", seq=2),
        tool("c1", "p" * 9000, mid="m3", seq=3),  # at the watermark: pruned
        tool("c2", "t" * 40_000, mid="m4", seq=4),  # over 8000 tokens: truncated
        tool("c3", "short", mid="m5", seq=5),
        # c4 has no result: one is synthesized
        Item("user", "world_state", [text_block("ws"), data_block()], RealOrigin("m6", 6)),
    ]
    marks = marks_of(items, PruningWatermark(3), accepts_data_blocks=False)
    assert marks == [(), (), ("pruned",), ("truncated",), (), ("synthesized",), ("filtered",)]


def test_a_pruned_result_over_the_projection_line_is_both() -> None:
    items = [assistant("", call("c1"), mid="m1", seq=1), tool("c1", "x" * 40_000, mid="m2", seq=2)]
    assert marks_of(items, PruningWatermark(2)) == [(), ("pruned",)]  # pruned well under it
    assert marks_of(items, PruningWatermark()) == [(), ("truncated",)]


def test_compaction_items_are_synthesized_and_unchanged_history_unmarked() -> None:
    items = [
        Item("user", "normal", [text_block("q")], SyntheticOrigin("k", "last_user_request_replay")),
        Item("user", "normal", [text_block("s")], SyntheticOrigin("k", "compaction_summary")),
        user("next", mid="m9", seq=9),
    ]
    assert marks_of(items, PruningWatermark()) == [("synthesized",), ("synthesized",), ()]
