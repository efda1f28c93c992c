"""``POST /v1/sessions/{id}/prepare``: the response, encoding, failures that store nothing, and
the compaction step at the trigger line, on both backends."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from sqlalchemy import select

from app.main import create_app
from app.services.budget import TurnCallEvidence
from app.settings import Settings
from app.storage.database import create_engine, create_session_factory, unit_of_work
from app.storage.models import AgentSession, SessionEvent
from app.storage.repositories.turns import TurnRepository
from tests.api.helpers import (
    append,
    assistant,
    new_session,
    prepare_session,
    provenance_without_tokens,
    stored,
    user,
    world_state_texts,
)
from tests.conftest import make_settings

pytestmark = pytest.mark.anyio

SMALL_MODEL = {
    "context_window_tokens": 1000,
    "max_output_tokens": 100,
    "provider": {"kind": "local"},
}  # effective input 900, trigger line ⌈900 × 0.85⌉ = 765


async def small_model(api: httpx.AsyncClient) -> str:
    """Register ``SMALL_MODEL`` under a fresh id (the PostgreSQL database is shared)."""
    model_id = f"tiny-{uuid.uuid4().hex[:8]}"
    assert (await api.put(f"/v1/models/{model_id}", json=SMALL_MODEL)).status_code == 201
    return model_id


class FakeCompactor:
    """Records what the prepare endpoint asks of the compaction service; edits the workspace
    while "compacting" so that the re-sampling after it has something to send."""

    def __init__(self, agents_md: Path) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._agents_md = agents_md

    async def prune(self, session_id: str) -> bool:
        self.calls.append(("prune", {"session_id": session_id}))
        return False

    async def compact_in_turn(
        self,
        session_id: str,
        *,
        trigger: Literal["threshold", "overflow"],
        turn_id: str,
        evidence: TurnCallEvidence | None,
    ) -> None:
        raise AssertionError("session prepare runs no turn")

    async def compact_for_prepare(
        self, session_id: str, *, prepare_id: str, evidence: TurnCallEvidence
    ) -> None:
        figures = {
            "estimated_input_tokens": evidence.budget.estimated_input_tokens,
            "model_call_index": evidence.model_call_index,
        }
        self.calls.append(("compact", {"prepare_id": prepare_id, **figures}))
        self._agents_md.write_text("Changed during compaction.")


async def client_with(settings: Settings, **container: Any) -> AsyncIterator[httpx.AsyncClient]:
    """A client of a fresh app whose container attributes ``container`` replaces (fakes)."""
    app = create_app(settings)
    for name, value in container.items():
        setattr(app.state.container, name, value)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield client


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = (tmp_path / "allowed").resolve()
    path.mkdir()
    return path


async def test_unknown_session_is_404_problem(api: httpx.AsyncClient) -> None:
    response = await prepare_session(api, "ses-missing")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["code"] == "session_not_found"


async def test_without_workspace_only_the_sandbox_section_is_sampled_and_inspection_agrees(
    api: httpx.AsyncClient,
) -> None:
    sid = await new_session(api)
    await append(api, sid, user("hello"))
    response = await api.post(f"/v1/sessions/{sid}/prepare")  # no body at all
    assert response.status_code == 200, response.text
    result = response.json()
    assert set(result) >= {
        "request",
        "budget",
        "projection",
        "provenance",
        "provider_payload",
        "auto_compact_percent",
    }
    assert result["provider_payload"] is None
    assert world_state_texts(await stored(api, sid)) == [
        "<sandbox_policy>\nmode: auto\nworkspace: None\n"
        "write / edit: can change files in the workspace.\n"
        "bash: runs in the sandbox and can write the workspace and temporary directories.\n"
        "</sandbox_policy>"
    ]
    (message_id,) = result["world_state_message_ids"]
    assert re.fullmatch(r"world-state:prepare-[0-9a-f]{32}:1:1:runtime/sandbox-policy", message_id)
    # What was returned is exactly what inspection (which never samples) now shows.
    inspected = (await api.get(f"/v1/sessions/{sid}/context")).json()
    for key in ("request", "projection", "provenance", "auto_compact_percent", "request_digest"):
        assert inspected[key] == result[key]
    # Its budget too, except that it is measured against the request just prepared: all of it.
    first, again = dict(result["budget"]), dict(inspected["budget"])
    assert (first.pop("stable_prefix_tokens"), first.pop("prefix_break")) == (0, None)
    assert again.pop("stable_prefix_tokens") == first["estimated_input_tokens"]
    assert again.pop("prefix_break") is None
    assert again == first
    assert len(await stored(api, sid)) == 2


async def test_encode_comes_from_the_body_and_the_query_overrides_it(
    api: httpx.AsyncClient,
) -> None:
    sid = await new_session(api)
    await append(api, sid, user("hello"))
    url = f"/v1/sessions/{sid}/prepare"
    openai = (await api.post(url, json={"encode": "openai_chat"})).json()["provider_payload"]
    assert openai is not None
    assert "messages" in openai
    anthropic = (
        await api.post(url, params={"encode": "anthropic_messages"}, json={"encode": "openai_chat"})
    ).json()["provider_payload"]
    assert anthropic is not None
    assert anthropic != openai
    assert anthropic["system"]  # Anthropic carries the system prompt outside the messages


@pytest.mark.parametrize(
    ("kwargs"),
    [
        {"json": {"encode": "xml"}},
        {"json": {"unknown": 1}},
        {"params": {"encode": "xml"}, "json": {}},
    ],
)
async def test_invalid_request_is_422_and_samples_nothing(
    api: httpx.AsyncClient, kwargs: dict[str, Any]
) -> None:
    sid = await new_session(api)
    response = await api.post(f"/v1/sessions/{sid}/prepare", **kwargs)
    assert response.status_code == 422
    assert response.json()["code"] == "invalid_request"
    assert await stored(api, sid) == []


async def test_at_the_trigger_line_without_a_compaction_service_it_is_reported(
    database_url: str,
) -> None:
    async for api in client_with(make_settings(database_url), compactor=None):
        sid = await new_session(api, model_id=await small_model(api))
        await append(api, sid, user("x" * 3000))
        result = (await prepare_session(api, sid)).json()
        budget = result["budget"]
        assert budget["auto_compact_token_limit"] == 765
        assert budget["reaches_auto_compact_limit"] is True
        assert result["auto_compact_percent"] >= 100
        assert len(await stored(api, sid)) == 2  # the message and the sandbox section


async def test_at_the_trigger_line_the_compaction_service_installs_a_checkpoint(
    api: httpx.AsyncClient,
) -> None:
    sid = await new_session(api, model_id=await small_model(api), summary_model_id="local")
    for i in range(3):
        # Long answers: what the summary replaces is larger than the summary (it must shrink).
        await append(api, sid, user(f"request {i}"), assistant(f"done {i}: " + "y " * 1000))
    result = (await prepare_session(api, sid)).json()

    checkpoints = (await api.get(f"/v1/sessions/{sid}/compactions")).json()["compactions"]
    assert [c["kind"] for c in checkpoints] == ["threshold"]
    # Sampled before compacting (index 1) and again after it (index 2): the sandbox section
    # was compacted away, so it is sent again, as a first appearance.
    ids = result["world_state_message_ids"]
    assert [i.rsplit(":", 2)[-2] for i in ids] == ["1", "2"]
    last = result["request"]["messages"][-1]["content"][0]["text"]
    assert last.startswith("<sandbox_policy>")
    # The request is the compaction projection (replay, summary, reminder) + the new section.
    provenance = provenance_without_tokens(result)
    assert [p.get("reason") for p in provenance[:3]] == [
        "last_user_request_replay",
        "compaction_summary",
        "system_reminder",
    ]
    assert provenance[3]["message_id"] == ids[1]
    inspected = (await api.get(f"/v1/sessions/{sid}/context")).json()
    assert inspected["request"] == result["request"]


async def test_a_running_turn_makes_prepare_409_and_nothing_is_written(
    database_url: str,
) -> None:
    app = create_app(make_settings(database_url))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as api:
            sid = await new_session(api)
            async with unit_of_work(app.state.container.db) as db:
                await TurnRepository(db).create_running(
                    session_id=sid,
                    turn_id="turn-1",
                    client_request_id="c-1",
                    input=[{"type": "text", "text": "hi"}],
                    phase="running_model",
                )
            response = await prepare_session(api, sid)
            assert response.status_code == 409
            assert response.json()["code"] == "session_active"
            assert await stored(api, sid) == []


async def test_at_the_trigger_line_it_prunes_compacts_and_samples_again(
    database_url: str, root: Path
) -> None:
    repo = root / "repo"
    repo.mkdir()
    (repo / "AGENTS.md").write_text("Original.")
    compactor = FakeCompactor(repo / "AGENTS.md")
    settings = make_settings(database_url, workspace_roots=[str(root)])
    async for api in client_with(settings, compactor=compactor):
        model_id = await small_model(api)
        sid = await new_session(api, model_id=model_id, workspace={"working_directory": str(repo)})
        await append(api, sid, user("x" * 3000))
        result = (await prepare_session(api, sid)).json()

        assert [name for name, _ in compactor.calls] == ["prune", "compact"]
        compact = compactor.calls[1][1]
        assert compact["prepare_id"].startswith("prepare-")
        assert compact["estimated_input_tokens"] + 100 >= 765  # at the trigger line
        assert compact["model_call_index"] == 1
        ids = result["world_state_message_ids"]
        assert len(ids) == 4  # three sections first, then AGENTS.md again after compaction
        assert ids[3] == f"world-state:{compact['prepare_id']}:1:2:project/AGENTS.md"
        assert all(i.startswith(f"world-state:{compact['prepare_id']}:1:1:") for i in ids[:3])
        last = result["request"]["messages"][-1]["content"][0]["text"]
        assert last.endswith(
            "<project_instructions>\nChanged during compaction.\n</project_instructions>"
        )


async def test_its_compaction_names_the_prepare_and_no_turn(database_url: str) -> None:
    """The checkpoint a session prepare installs links no turn (none runs): its
    ``trigger_prepare_id`` is the prepare's request id, which also names the World State it
    wrote, and so do its live updates (on both engines)."""
    async for api in client_with(make_settings(database_url)):
        sid = await new_session(api, model_id=await small_model(api), summary_model_id="local")
        for i in range(3):
            # Long answers: a summary is shorter than them (it must shrink, spec §9).
            await append(api, sid, user(f"request {i}"), assistant(f"done {i}: " + "y " * 1000))
        response = await prepare_session(api, sid)
        assert response.status_code == 200, response.text
        (checkpoint,) = (await api.get(f"/v1/sessions/{sid}/compactions")).json()["compactions"]
        assert (checkpoint["kind"], checkpoint["trigger_turn_id"]) == ("threshold", None)
        prepare_id = checkpoint["trigger_prepare_id"]
        assert re.fullmatch("prepare-[0-9a-f]{32}", prepare_id)
        assert all(
            i.startswith(f"world-state:{prepare_id}:")
            for i in response.json()["world_state_message_ids"]
        )
        events = await stored_events(database_url, sid, "compaction_started", "compaction_finished")
        assert [(turn_id, payload["prepare_id"]) for turn_id, payload in events] == [
            (None, prepare_id),
            (None, prepare_id),
        ]


async def stored_events(
    database_url: str, session_id: str, *types: str
) -> list[tuple[str | None, dict[str, Any]]]:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(
                select(SessionEvent.turn_id, SessionEvent.payload)
                .where(SessionEvent.session_id == session_id, SessionEvent.type.in_(types))
                .order_by(SessionEvent.sequence)
            )
            return [(row[0], row[1]) for row in rows]
    finally:
        await engine.dispose()


async def test_below_the_trigger_line_the_compaction_service_is_not_asked(
    database_url: str, root: Path
) -> None:
    compactor = FakeCompactor(root / "unused.md")
    async for api in client_with(make_settings(database_url), compactor=compactor):
        sid = await new_session(api)
        await append(api, sid, user("short"))
        result = (await prepare_session(api, sid)).json()
        assert result["budget"]["reaches_auto_compact_limit"] is False
        assert compactor.calls == []


async def test_capture_failures_are_422_with_their_code_and_store_nothing(
    database_url: str, root: Path
) -> None:
    repo, skills = root / "repo", root / "skills"
    repo.mkdir()
    skills.mkdir()
    async for api in client_with(make_settings(database_url, workspace_roots=[str(root)])):
        sid = await new_session(
            api, workspace={"working_directory": str(repo), "skills_root": str(skills)}
        )
        await append(api, sid, user("hi"))

        skills.rmdir()
        skills.write_text("not a directory")
        response = await prepare_session(api, sid)
        assert response.status_code == 422, response.text
        assert response.json()["code"] == "skill_catalog_error"

        repo.rmdir()
        response = await prepare_session(api, sid)
        assert response.status_code == 422, response.text
        assert response.json()["code"] == "user_project_context_error"
        assert [m["kind"] for m in await stored(api, sid)] == ["normal"]


PROVIDED = {"provided": {"working_directory": "/w", "layout": ["a"]}}
DATA_BLOCK = {
    "type": "data",
    "source": {"source_type": "url", "url": "https://example.com/a.png", "media_type": "image/png"},
}


async def refused_session(api: httpx.AsyncClient, code: str, database_url: str = "") -> str:
    """A session with a workspace whose prepare is refused with ``code`` (valid when stored)."""
    if code == "system_context_part_too_large":
        # Creation refuses such a prompt now; a session stored before that check still has one.
        sid = await new_session(api, workspace=PROVIDED)
        engine = create_engine(database_url)
        try:
            async with unit_of_work(create_session_factory(engine)) as db:
                row = await db.get(AgentSession, sid)
                assert row is not None
                row.agent = {**row.agent, "system_prompt": "x" * 40_000}
        finally:
            await engine.dispose()
        await append(api, sid, user("hi"))
        return sid
    model_id = f"no-data-{uuid.uuid4().hex[:8]}"
    no_data = {**SMALL_MODEL, "context_window_tokens": 100_000, "accepts_data_blocks": False}
    assert (await api.put(f"/v1/models/{model_id}", json=no_data)).status_code == 201
    sid = await new_session(api, workspace=PROVIDED, model_id=model_id)
    await append(api, sid, {"role": "user", "content": [*user("look")["content"], DATA_BLOCK]})
    return sid


@pytest.mark.parametrize("code", ["system_context_part_too_large", "data_blocks_not_accepted"])
async def test_a_refused_prepare_stores_no_world_state(
    api: httpx.AsyncClient, database_url: str, code: str
) -> None:
    sid = await refused_session(api, code, database_url)
    response = await prepare_session(api, sid)
    assert response.status_code == 422, response.text
    assert response.json()["code"] == code
    assert [m["kind"] for m in await stored(api, sid)] == ["normal"]  # spec §8


async def test_after_a_refused_prepare_the_next_one_sends_the_world_state(
    api: httpx.AsyncClient,
) -> None:
    # The refused prepare advanced no baseline: once the model accepts the data block, the
    # sections are sent (and stored) by the prepare that succeeds.
    sid = await refused_session(api, "data_blocks_not_accepted")
    assert (await prepare_session(api, sid)).status_code == 422
    assert (await api.patch(f"/v1/sessions/{sid}", json={"model_id": "local"})).status_code == 200
    result = (await prepare_session(api, sid)).json()
    assert len(result["world_state_message_ids"]) == 2  # project context and sandbox policy
    assert [m["kind"] for m in await stored(api, sid)] == ["normal", "world_state", "world_state"]
