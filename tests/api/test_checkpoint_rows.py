"""A checkpoint whose stored runtime state this version cannot read or render (another version's,
a hand edit) is not carried into the next one: the next compaction derives its state afresh
from the messages instead of refusing — before, every later compaction of the session answered
422 ``compaction_error`` for ever."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import update

from app.storage.database import unit_of_work
from app.storage.models import Compaction
from tests.api.helpers import new_session

pytestmark = pytest.mark.anyio


def exchange(start: int) -> list[dict[str, Any]]:
    edit = {"type": "tool_call", "id": f"e{start}", "name": "edit", "input": '{"path": "a.py"}'}
    result = {
        "type": "tool_result",
        "id": f"e{start}",
        "name": "edit",
        "state": "success",
        "output": [{"type": "text", "text": "edited"}],
        "artifacts": [{"kind": "file_change", "payload": {"path": "src/a.py"}}],
    }
    return [
        {"role": "user", "content": [{"type": "text", "text": f"change step {start}"}]},
        {"role": "assistant", "content": [edit]},
        {"role": "tool", "content": [result]},
        {"role": "assistant", "content": [{"type": "text", "text": f"done {start}"}]},
    ]


@pytest.mark.parametrize(
    "runtime_state",
    [
        [1],
        {"schema_version": 99, "edited_paths": []},
        {"schema_version": 1, "edited_paths": "src/a.py"},
        # Readable, but its plan cannot be rendered.
        {"schema_version": 1, "extensions": {"turn_plan": {"schema_version": 1, "value": 7}}},
    ],
)
async def test_the_next_compaction_starts_afresh(
    api: httpx.AsyncClient, runtime_state: Any
) -> None:
    sid = await new_session(api, model_id="local", summary_model_id="local")
    for start in (1, 2):
        body = {"messages": exchange(start)}
        appended = await api.post(f"/v1/sessions/{sid}/messages", json=body)
        assert appended.status_code == 201, appended.text
    first = await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    assert first.status_code == 201, first.text
    container = api._transport.app.state.container  # type: ignore[attr-defined]
    async with unit_of_work(container.db) as db:
        await db.execute(
            update(Compaction)
            .where(Compaction.session_id == sid)
            .values(runtime_state=runtime_state)
        )
    for start in (3, 4):
        await api.post(f"/v1/sessions/{sid}/messages", json={"messages": exchange(start)})

    second = await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})

    assert second.status_code == 201, second.text
    checkpoint = second.json()
    assert (checkpoint["sequence"], first.json()["sequence"]) == (2, 1)
    stored = (await api.get(f"/v1/sessions/{sid}/compactions/{checkpoint['compaction_id']}")).json()
    assert stored["runtime_state"]["edited_paths"] == ["src/a.py"]  # derived from the messages
    context = await api.get(f"/v1/sessions/{sid}/context")
    assert context.status_code == 200, context.text
