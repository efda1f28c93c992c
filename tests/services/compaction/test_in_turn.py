"""In-turn compaction, pruning, runtime state through the database, session_active."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pytest

from app.core.compaction.shrink import CompactionNotSmaller
from app.core.errors import Conflict
from app.core.pipeline.prepared_call import Budget
from app.services.budget import TurnCallEvidence
from app.storage.database import unit_of_work
from app.storage.repositories import (
    CompactionRepository,
    EventRepository,
    TurnRepository,
)
from tests.api.helpers import append, assistant_calls, new_session, text, tool_result, user
from tests.conftest import make_settings
from tests.services.compaction.builders import BIG_TEXT, VALID, scripted_model
from tests.services.compaction.conftest import FAST, Harness, harness_for

ZERO_BUDGET: dict[str, Any] = {
    f.name: 0 for f in fields(Budget) if f.name not in ("stable_prefix_tokens", "prefix_break")
} | {"reaches_auto_compact_limit": True, "dynamic_budget_exhausted": False, "counter": "estimate"}

pytestmark = pytest.mark.anyio


async def start_turn(h: Harness, sid: str, turn_id: str = "turn-1") -> str:
    async with unit_of_work(h.container.db) as db:
        await TurnRepository(db).create_running(
            session_id=sid, turn_id=turn_id, client_request_id=turn_id, input=[], phase="model"
        )
    return turn_id


async def basic(h: Harness, **session: Any) -> str:
    sid = await new_session(h.api, **session)
    response = await append(
        h.api,
        sid,
        user("Edit a.py please."),
        assistant_calls(("c1", "edit")),
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool_result",
                    "id": "c1",
                    "name": "edit",
                    "output": text("edited"),
                    "state": "success",
                    "artifacts": [
                        {"kind": "file_change", "payload": {"path": "src/a.py"}},
                        {"kind": "file_change", "payload": {"path": "b.py", "undone": True}},
                    ],
                }
            ],
        },
        # Long enough for a summary to be shorter (an in-turn compaction must shrink it).
        {"role": "assistant", "content": text("Done. " + "Notes on the change. " * 150)},
    )
    assert response.status_code == 201, response.text
    return sid


async def test_threshold_compaction_links_the_turn_and_records_evidence(harness: Harness) -> None:
    h = harness
    await scripted_model(
        h.api, "summary", [{"text": VALID, "usage": {"input_tokens": 70, "output_tokens": 30}}]
    )
    sid = await basic(h, summary_model_id="summary")
    turn = await start_turn(h, sid)
    async with unit_of_work(h.container.db) as db:
        await TurnRepository(db).update_running(
            sid,
            turn,
            plan={"explanation": "Plan", "plan": [{"step": "fix a", "status": "in_progress"}]},
        )

    # The request that crossed the line: its window and estimate are the ones recorded.
    crossed = replace(Budget(**ZERO_BUDGET), context_window_tokens=32_000)
    crossed = replace(crossed, estimated_input_tokens=30_500)
    await h.container.compactor.compact_in_turn(
        sid, trigger="threshold", turn_id=turn, evidence=TurnCallEvidence(crossed, 2)
    )

    async with unit_of_work(h.container.db, read_only=True) as db:
        (row,) = await CompactionRepository(db).list_for_session(sid)
        turn_row = await TurnRepository(db).get(sid, turn)
        # The setup's own appends announce themselves (messages_appended): not under test.
        events = [
            e for e in await EventRepository(db).list_after(sid) if e.type != "messages_appended"
        ]
    assert row.kind == "threshold"
    assert row.trigger_turn_id == turn
    assert row.trigger is not None
    assert row.trigger["model_call_index"] == 2
    assert row.trigger["context_window_tokens"] == 32_000
    assert row.trigger["estimated_input_tokens"] == 30_500
    # The rest measures the conversation the compaction read, with the built-in local model.
    assert row.trigger["effective_input_tokens"] > 0
    assert row.trigger["counter"]
    assert row.runtime_reminder == (
        '<system_reminder format_version="1">\n## Edited paths\n- src/a.py\n\n'
        "## Current plan\nPlan\n- [in_progress] fix a\n</system_reminder>"
    )
    assert turn_row is not None
    assert (turn_row.input_tokens, turn_row.output_tokens) == (70, 30)
    assert [e.type for e in events] == ["compaction_started", "compaction_finished"]
    assert events[1].payload["compaction_id"] == row.compaction_id


@pytest.mark.parametrize("trigger", ["threshold", "overflow"])
async def test_an_in_turn_compaction_that_would_not_shrink_stores_nothing_and_says_so(
    harness: Harness, trigger: Any
) -> None:
    h = harness
    sid = await new_session(h.api)
    await append(h.api, sid, user("Is it up?"), {"role": "assistant", "content": text("Yes.")})
    turn = await start_turn(h, sid)
    before = (await h.api.get(f"/v1/sessions/{sid}/context")).content

    with pytest.raises(CompactionNotSmaller) as caught:
        await h.container.compactor.compact_in_turn(
            sid, trigger=trigger, turn_id=turn, evidence=None
        )

    refused = caught.value
    assert refused.before < refused.after
    assert (await h.api.get(f"/v1/sessions/{sid}/compactions")).json()["compactions"] == []
    assert (await h.api.get(f"/v1/sessions/{sid}/context")).content == before
    async with unit_of_work(h.container.db, read_only=True) as db:
        events = [
            e for e in await EventRepository(db).list_after(sid) if e.type != "messages_appended"
        ]
        turn_row = await TurnRepository(db).get(sid, turn)
    assert turn_row is not None
    assert turn_row.input_tokens > 0  # the summary call ran: the turn pays for it
    assert [e.type for e in events] == ["compaction_started", "compaction_finished"]
    assert events[1].payload == {
        "status": "not_installed",
        "kind": trigger,
        "code": "compaction_not_smaller",
        "conversation_tokens_before": refused.before,
        "conversation_tokens_after": refused.after,
        "detail": f"the {trigger} compaction would not reduce the conversation "
        f"({refused.before} → {refused.after} tokens), so it was not installed",
    }


async def test_in_turn_compaction_needs_its_turn_running(harness: Harness) -> None:
    h = harness
    sid = await basic(h)
    turn = await start_turn(h, sid)
    async with unit_of_work(h.container.db) as db:
        await TurnRepository(db).finish(sid, turn, status="completed", outcome={})
    with pytest.raises(Conflict) as caught:
        await h.container.compactor.compact_in_turn(
            sid, trigger="overflow", turn_id=turn, evidence=None
        )
    assert caught.value.code == "turn_not_running"
    assert (await h.api.get(f"/v1/sessions/{sid}/compactions")).json()["compactions"] == []


async def test_manual_compaction_and_rewind_refuse_while_a_turn_runs(harness: Harness) -> None:
    h = harness
    sid = await basic(h)
    checkpoint = (
        await h.api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    ).json()
    await start_turn(h, sid)
    before = (await h.api.get(f"/v1/sessions/{sid}/context")).content

    manual = await h.api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    rewind = await h.api.post(
        f"/v1/sessions/{sid}/rewind", json={"compaction_id": checkpoint["compaction_id"]}
    )

    for response in (manual, rewind):
        assert (response.status_code, response.json()["code"]) == (409, "session_active")
    assert (await h.api.get(f"/v1/sessions/{sid}/context")).content == before


async def test_unknown_extensions_survive_through_the_database(harness: Harness) -> None:
    h = harness
    sid = await basic(h)
    first = (
        await h.api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    ).json()
    assert first["runtime_state"]["edited_paths"] == ["src/a.py"]
    async with unit_of_work(h.container.db) as db:
        row = await CompactionRepository(db).get(sid, first["compaction_id"])
        assert row is not None
        state = dict(row.runtime_state)
        state["extensions"] = {
            **state["extensions"],
            "x-other": {"schema_version": 7, "value": {"keep": ["me"]}},
        }
        row.runtime_state = state
    await append(h.api, sid, user("And now b."))

    second = (
        await h.api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    ).json()

    assert second["runtime_state"]["extensions"]["x-other"] == {
        "schema_version": 7,
        "value": {"keep": ["me"]},
    }
    assert "x-other" not in second["runtime_reminder"]
    assert "keep" not in second["runtime_reminder"]
    rewind = (
        await h.api.post(
            f"/v1/sessions/{sid}/rewind", json={"compaction_id": first["compaction_id"]}
        )
    ).json()
    assert rewind["runtime_state"]["extensions"]["x-other"]["value"] == {"keep": ["me"]}


async def with_spill(database_url: str, tmp_path: Path) -> AsyncIterator[tuple[Harness, Path]]:
    """A harness whose workspace root is ``tmp_path``, and a spill directory in it."""
    spill = tmp_path / "spill"
    spill.mkdir()
    async for h in harness_for(
        make_settings(database_url, workspace_roots=[str(tmp_path)], **FAST)
    ):
        yield h, spill


async def test_pruning_that_is_enough_makes_no_summary_and_no_checkpoint(
    database_url: str, tmp_path: Path
) -> None:
    async for h, spill in with_spill(database_url, tmp_path):
        # Window 12000, output 1000: line 9350; each big result is ~5000 tokens.
        await scripted_model(
            h.api, "small", [], context_window_tokens=12000, max_output_tokens=1000
        )
        sid = await new_session(
            h.api,
            model_id="small",
            summary_model_id="small",  # an empty script: any summary call would fail
            workspace={"working_directory": str(tmp_path), "spill_directory": str(spill)},
        )
        await append(
            h.api,
            sid,
            user("Read the log."),
            assistant_calls(("call/1", "read")),
            tool_result("call/1", BIG_TEXT),
            {"role": "assistant", "content": text("It is long.")},
            assistant_calls(("call-2", "read")),
            tool_result("call-2", BIG_TEXT),
        )
        before = (await h.api.get(f"/v1/sessions/{sid}/context")).json()
        assert before["budget"]["reaches_auto_compact_limit"] is True

        response = await h.api.post(f"/v1/sessions/{sid}/prepare", json={})

        assert response.status_code == 200, response.text
        assert response.json()["budget"]["reaches_auto_compact_limit"] is False
        assert response.json()["projection"]["pruned_tool_results"] == 1
        session = (await h.api.get(f"/v1/sessions/{sid}")).json()
        # Latest assistant message is #5: the result of the newest response (#6) stays whole.
        assert session["tool_result_pruned_through_sequence"] == 5
        assert (await h.api.get(f"/v1/sessions/{sid}/compactions")).json()["compactions"] == []
        assert (spill / "call_1.c5fb05e4d7a4906f.txt").read_text(encoding="utf-8") == BIG_TEXT
        pruned = response.json()["request"]["messages"][3]["content"][0]["output"][0]["text"]
        assert f"Full result at {spill}/call_1.c5fb05e4d7a4906f.txt — read it" in pruned
        # The stored message is unchanged, and a second prune has nothing left to do.
        assert (await h.container.compactor.prune(sid)) is False
        messages = (await h.api.get(f"/v1/sessions/{sid}/messages")).json()["messages"]
        assert messages[2]["content"][0]["output"][0]["text"] == BIG_TEXT


async def test_results_whose_ids_sanitize_alike_spill_to_files_of_their_own(
    database_url: str, tmp_path: Path
) -> None:
    async for h, spill in with_spill(database_url, tmp_path):
        sid = await new_session(
            h.api, workspace={"working_directory": str(tmp_path), "spill_directory": str(spill)}
        )
        first, second = "first " + BIG_TEXT, "second " + BIG_TEXT
        await append(
            h.api,
            sid,
            user("Read both logs."),
            assistant_calls(("a.b", "read"), ("a_b", "read")),
            tool_result("a.b", first),
            tool_result("a_b", second),
            {"role": "assistant", "content": text("Both are long.")},
        )

        assert await h.container.compactor.prune(sid) is True

        files = {p.name: p.read_text(encoding="utf-8") for p in spill.iterdir()}
        assert files == {"a_b.2e7336dc8eba87ef.txt": first, "a_b.txt": second}
        sent = (await h.api.get(f"/v1/sessions/{sid}/context")).json()["request"]["messages"]
        markers = [m["content"][0]["output"][0]["text"] for m in sent if m["role"] == "tool"]
        assert f"Full result at {spill}/a_b.2e7336dc8eba87ef.txt — read it" in markers[0]
        assert markers[0].startswith("first ")
        assert f"Full result at {spill}/a_b.txt — read it" in markers[1]
        assert markers[1].startswith("second ")


async def test_manual_compaction_does_not_prune(harness: Harness) -> None:
    h = harness
    sid = await new_session(h.api)
    await append(
        h.api,
        sid,
        user("Read."),
        assistant_calls(("c1", "read")),
        tool_result("c1", BIG_TEXT),
        {"role": "assistant", "content": text("ok")},
    )
    assert (
        await h.api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    ).status_code == 201
    session = (await h.api.get(f"/v1/sessions/{sid}")).json()
    assert session["tool_result_pruned_through_sequence"] is None
