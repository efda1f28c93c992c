"""The prefix is kept when there is a choice, through a real turn loop:

- a World State change between two model calls is appended after everything already sent, so
  the second request's messages start with the first request's, byte for byte;
- one pruning moves the watermark once, as far as spec §7.2 allows, and the later calls send
  the pruned part unchanged (the prefix breaks at that call only).

Each model call's provider-independent request is recorded where the runner hands it to the
model client, so the comparison is of exactly what was sent.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.core.caching.breakpoints import CachePlan
from app.core.content import Item
from app.providers.base import ModelClient, ModelResponse, StreamSink
from app.services.model_types import ModelEntry
from tests.conftest import make_settings
from tests.services.compaction.builders import BIG_TEXT, scripted_model
from tests.services.compaction.conftest import FAST, Harness, harness_for

pytestmark = pytest.mark.anyio

AGENTS_REPLACED = (
    "The AGENTS.md instructions below replace all previously provided AGENTS.md instructions."
)
READ_TOOL = {
    "name": "read",
    "description": "Read a file",
    "input_schema": {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": False,
    },
}


class _Recording:
    """Wraps a model client; appends a deep copy of every request it is given."""

    def __init__(self, inner: ModelClient, sent: list[dict[str, Any]]) -> None:
        self._inner = inner
        self._sent = sent

    async def complete(
        self,
        request: dict[str, Any],
        *,
        sink: StreamSink | None = None,
        caching: CachePlan | None = None,
        conversation: Sequence[Item] | None = None,
    ) -> ModelResponse:
        self._sent.append(copy.deepcopy(request))
        return await self._inner.complete(
            request, sink=sink, caching=caching, conversation=conversation
        )


def record_requests(h: Harness, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []
    clients = h.container.model_clients
    original = clients.for_model

    def for_model(entry: ModelEntry, *, session_id: str, purpose: str = "turn") -> ModelClient:
        inner = original(entry, session_id=session_id, purpose=purpose)
        return _Recording(inner, sent) if purpose == "turn" else inner

    monkeypatch.setattr(clients, "for_model", for_model)
    return sent


def record_prunes(h: Harness, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each pruning the runner asks for moved the watermark, in order."""
    prunes: list[bool] = []
    compactor = h.container.compactor
    assert compactor is not None
    original = compactor.prune

    async def prune(session_id: str) -> bool:
        moved = await original(session_id)
        prunes.append(moved)
        return moved

    monkeypatch.setattr(compactor, "prune", prune)
    return prunes


def wire(messages: list[dict[str, Any]]) -> list[bytes]:
    """Each message as bytes (key order kept): "byte for byte" means these are equal."""
    return [json.dumps(m, ensure_ascii=False).encode() for m in messages]


def read_call(n: int) -> dict[str, Any]:
    return {"tool_calls": [{"name": "read", "input": {"path": f"f{n}.txt"}}]}


async def start_turn(api: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    body = {"client_request_id": uuid.uuid4().hex, "input": [{"type": "text", "text": "go"}]}
    response = await api.post(f"/v1/sessions/{sid}/turns", params={"wait": "true"}, json=body)
    assert response.status_code in (200, 202), response.text
    return dict(response.json())


async def answer(api: httpx.AsyncClient, sid: str, turn: dict[str, Any], text: str) -> Any:
    """Post a success result for the turn's one pending call; the turn after it (waited on)."""
    assert turn["phase"] == "waiting_tool_results", turn
    (pending,) = turn["pending_tool_calls"]
    result = {
        "tool_call_id": pending["tool_call_id"],
        "state": "success",
        "output": [{"type": "text", "text": text}],
    }
    response = await api.post(
        f"/v1/sessions/{sid}/turns/{turn['turn_id']}/tool-results",
        params={"wait": "true"},
        json={"results": [result]},
    )
    assert response.status_code in (200, 202), response.text
    return response.json()


async def test_a_world_state_change_is_appended_after_everything_already_sent(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = (tmp_path / "allowed").resolve()
    repo = root / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "AGENTS.md").write_text("Be brief.\n")
    settings = make_settings(database_url, workspace_roots=[str(root)], **FAST)
    async for h in harness_for(settings):
        sent = record_requests(h, monkeypatch)
        model_id = f"ws-{uuid.uuid4().hex[:8]}"
        await scripted_model(h.api, model_id, [read_call(1), read_call(2), {"text": "done"}])
        created = await h.api.post(
            "/v1/sessions",
            json={
                "model_id": model_id,
                "agent": {
                    "system_prompt": "You are careful.",
                    "tools": [READ_TOOL],
                    "preset": "coding",
                },
                "workspace": {"working_directory": str(repo)},
            },
        )
        assert created.status_code == 201, created.text
        sid = created.json()["id"]

        turn = await start_turn(h.api, sid)
        (repo / "AGENTS.md").write_text("Be thorough.\n")  # changes between call 1 and call 2
        turn = await answer(h.api, sid, turn, "one")
        turn = await answer(h.api, sid, turn, "two")
        assert turn["status"] == "completed", turn

        first, second, third = (wire(r["messages"]) for r in sent)
        assert second[: len(first)] == first
        assert third[: len(second)] == second
        added = [json.loads(m) for m in second[len(first) :]]
        texts = [b.get("text", "") for m in added for b in m["content"] if b["type"] == "text"]
        # The replacement notice came after the call's tool result, not before anything sent.
        assert any(t.startswith(AGENTS_REPLACED) and "Be thorough." in t for t in texts), added
        assert added[0]["role"] == "assistant"


async def test_one_pruning_moves_the_watermark_once_and_later_calls_keep_the_pruned_part(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls_after = 4
    async for h in harness_for(make_settings(database_url, **FAST)):
        sent = record_requests(h, monkeypatch)
        prunes = record_prunes(h, monkeypatch)
        # Window 12000, output 1000: trigger line 9350 tokens; a big result is ~5000.
        script = [read_call(n) for n in range(1, 3 + calls_after)] + [{"text": "done"}]
        model_id = f"prune-{uuid.uuid4().hex[:8]}"
        await scripted_model(
            h.api, model_id, script, context_window_tokens=12000, max_output_tokens=1000
        )
        created = await h.api.post(
            "/v1/sessions",
            json={
                "model_id": model_id,
                "summary_model_id": model_id,  # any summary call would fail the turn
                "agent": {
                    "system_prompt": "You are careful.",
                    "tools": [READ_TOOL],
                    "preset": "coding",
                },
            },
        )
        assert created.status_code == 201, created.text
        sid = created.json()["id"]

        watermarks: list[int | None] = []
        turn = await start_turn(h.api, sid)
        for n in range(2 + calls_after):
            # Two big results (the second one's call triggers pruning), then small ones.
            turn = await answer(h.api, sid, turn, BIG_TEXT if n < 2 else f"small {n}")
            session = (await h.api.get(f"/v1/sessions/{sid}")).json()
            watermarks.append(session["tool_result_pruned_through_sequence"])
        assert turn["status"] == "completed", turn

        # Call 3 pruned (once, to the latest assistant message then: call 2's); nothing after.
        assert prunes == [True]
        moved_to = watermarks[1]
        assert moved_to is not None
        assert watermarks == [None] + [moved_to] * (1 + calls_after)
        assert (await h.api.get(f"/v1/sessions/{sid}/compactions")).json()["compactions"] == []
        requests = [wire(r["messages"]) for r in sent]
        assert len(requests) == 3 + calls_after
        pruned_call = requests[2]
        # The prefix broke at the pruning call (the first big result is shorter now) ...
        assert requests[1] != pruned_call[: len(requests[1])]
        assert any(b"tool result pruned" in m for m in pruned_call)
        # ... and every later call sends that pruned request unchanged as its prefix.
        for later in requests[3:]:
            assert later[: len(pruned_call)] == pruned_call
