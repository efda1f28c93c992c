"""``/v1/models``: catalogue, registration, validation, deletion."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import update

from app.storage.database import unit_of_work
from app.storage.models import RegisteredModel
from tests.api.helpers import new_session, run_turn

pytestmark = pytest.mark.anyio


def scripted(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "context_window_tokens": 1000,
        "max_output_tokens": 100,
        "provider": {"kind": "scripted", "script": [{"text": "hi"}]},
    }
    body.update(overrides)
    return body


async def test_the_catalogue_lists_real_limits(api: httpx.AsyncClient) -> None:
    models = {m["id"]: m for m in (await api.get("/v1/models")).json()}
    assert models["gpt-5"]["context_window_tokens"] == 400_000
    assert models["gpt-5"]["effective_input_tokens"] == 272_000
    assert models["claude-opus-4-7"]["max_output_tokens"] == 128_000
    assert models["local"]["provider"]["kind"] == "local"
    # Other tests register models in the shared PostgreSQL database; the catalogue is built in.
    assert all(models[i]["builtin"] for i in ("local", "gpt-5", "claude-haiku-4-5"))


async def test_register_read_replace_and_delete(api: httpx.AsyncClient) -> None:
    created = await api.put("/v1/models/team-bot", json=scripted())
    assert created.status_code == 201, created.text
    model = created.json()
    assert model["builtin"] is False
    assert model["effective_input_tokens"] == 900
    assert model["auto_compact_token_limit"] == 765
    assert model["provider"]["script_position"] == 0
    replaced = await api.put("/v1/models/team-bot", json=scripted(max_output_tokens=200))
    assert replaced.status_code == 200
    assert (await api.get("/v1/models/team-bot")).json()["max_output_tokens"] == 200
    assert (await api.delete("/v1/models/team-bot")).status_code == 204
    missing = await api.get("/v1/models/team-bot")
    assert missing.status_code == 404
    assert missing.json()["code"] == "model_not_found"


async def test_a_registered_model_overrides_the_catalogue_entry(api: httpx.AsyncClient) -> None:
    body = scripted(context_window_tokens=5000)
    assert (await api.put("/v1/models/gpt-5", json=body)).status_code == 201
    assert (await api.get("/v1/models/gpt-5")).json()["context_window_tokens"] == 5000
    assert (await api.delete("/v1/models/gpt-5")).status_code == 204
    assert (await api.get("/v1/models/gpt-5")).json()["context_window_tokens"] == 400_000
    refused = await api.delete("/v1/models/gpt-5")
    assert refused.status_code == 409
    assert refused.json()["code"] == "builtin_model"


async def test_deleting_a_built_in_without_an_override_says_it_cannot(
    api: httpx.AsyncClient,
) -> None:
    before = (await api.get("/v1/models/gpt-5-mini")).json()
    refused = await api.delete("/v1/models/gpt-5-mini")
    assert refused.status_code == 409, refused.text
    problem = refused.json()
    assert (problem["code"], problem["model_id"]) == ("builtin_model", "gpt-5-mini")
    assert "built-in entries cannot be deleted, only a registered override" in problem["detail"]
    assert (await api.get("/v1/models/gpt-5-mini")).json() == before


@pytest.mark.parametrize("role", ["model_id", "summary_model_id"])
async def test_a_model_a_session_uses_is_kept_until_the_session_moves(
    api: httpx.AsyncClient, role: str
) -> None:
    assert (await api.put("/v1/models/team-bot", json=scripted())).status_code == 201
    sid = await new_session(
        api, **{"model_id": "local", "summary_model_id": "local", role: "team-bot"}
    )
    refused = await api.delete("/v1/models/team-bot")
    assert refused.status_code == 409, refused.text
    assert (refused.json()["code"], refused.json()["sessions"]) == ("model_in_use", 1)
    assert (await api.get("/v1/models/team-bot")).status_code == 200
    moved = await api.patch(f"/v1/sessions/{sid}", json={role: "local"})
    assert moved.status_code == 200, moved.text
    assert (await api.delete("/v1/models/team-bot")).status_code == 204


async def test_an_override_a_session_uses_may_go_back_to_the_catalogue(
    api: httpx.AsyncClient,
) -> None:
    assert (await api.put("/v1/models/gpt-5", json=scripted())).status_code == 201
    await new_session(api, model_id="gpt-5")
    assert (await api.delete("/v1/models/gpt-5")).status_code == 204
    assert (await api.get("/v1/models/gpt-5")).json()["builtin"] is True


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (scripted(max_output_tokens=1000, output_reserve_tokens=1000), "invalid_capabilities"),
        (scripted(output_reserve_tokens=101), "invalid_capabilities"),  # over max_output_tokens
        (scripted(output_reserve_tokens=0), "invalid_request"),
        (scripted(safety_margin_tokens=500, fixed_reserve_tokens=400), "invalid_capabilities"),
        (scripted(max_reasoning_tokens=900), "invalid_capabilities"),
        (scripted(context_window_tokens=-5), "invalid_request"),
        (scripted(provider={"kind": "openai_chat"}), "invalid_request"),
        (scripted(provider={"kind": "scripted"}), "invalid_request"),
        (
            scripted(provider={"kind": "local", "api_key_env": "sk-live-123 secret"}),
            "invalid_request",
        ),
        (scripted(token_counter="bytes"), "invalid_request"),
    ],
)
async def test_inconsistent_models_are_refused_and_not_stored(
    api: httpx.AsyncClient, body: dict[str, Any], code: str
) -> None:
    response = await api.put("/v1/models/bad-model", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["code"] == code
    assert (await api.get("/v1/models/bad-model")).status_code == 404


async def stored_model(api: httpx.AsyncClient, model_id: str, **values: Any) -> str:
    """A scripted model whose row then holds ``values`` (what registration would refuse), and a
    session of it."""
    assert (await api.put(f"/v1/models/{model_id}", json=scripted())).status_code in (200, 201)
    sid = await new_session(api, model_id=model_id)
    container = api._transport.app.state.container  # type: ignore[attr-defined]
    async with unit_of_work(container.db) as db:
        await db.execute(
            update(RegisteredModel).where(RegisteredModel.id == model_id).values(values)
        )
    return sid


async def test_a_stored_model_that_leaves_no_input_room_still_lists_and_says_why(
    api: httpx.AsyncClient,
) -> None:
    # As a row stored under other rules (registration refuses it): one such model used to make
    # the whole list answer 422.
    # The whole window kept for the answer.
    sid = await stored_model(api, "old-rules", max_output_tokens=1000, output_reserve_tokens=1000)

    listed = await api.get("/v1/models")
    assert listed.status_code == 200, listed.text
    model = {m["id"]: m for m in listed.json()}["old-rules"]
    assert (model["effective_input_tokens"], model["auto_compact_token_limit"]) == (0, 0)
    readiness = model["readiness"]
    assert (readiness["status"], readiness["code"]) == ("not_ready", "invalid_capabilities")
    assert readiness["detail"].startswith("calls to this model will fail: ")
    assert readiness["detail"].endswith(
        "; register it again with capabilities that leave input room"
    )
    assert (await api.get("/v1/models/old-rules")).json() == model
    # What needs its limits refuses it plainly; the session itself still reads.
    refused = await api.get(f"/v1/sessions/{sid}/context")
    assert refused.status_code == 422
    assert refused.json()["code"] == "invalid_capabilities"
    assert (await api.get(f"/v1/sessions/{sid}")).status_code == 200
    # Registered again with room, it is ready.
    assert (await api.put("/v1/models/old-rules", json=scripted())).status_code == 200
    again = (await api.get("/v1/models/old-rules")).json()
    assert again["readiness"]["status"] == "ready"
    assert again["effective_input_tokens"] == 900


async def test_a_stored_model_with_a_counter_this_version_lacks_says_so(
    api: httpx.AsyncClient,
) -> None:
    # As a newer version might store it.
    sid = await stored_model(api, "newer", token_counter="tiktoken:o300k_base")

    model = (await api.get("/v1/models/newer")).json()
    assert model["readiness"] == {
        "status": "not_ready",
        "code": "unknown_token_counter",
        "detail": "calls to this model will fail: this version has no token counter "
        "'tiktoken:o300k_base'; register it again with one of: estimate, tiktoken:o200k_base, "
        "tiktoken:cl100k_base",
    }
    assert model["effective_input_tokens"] == 900  # its limits do not depend on the counter
    refused = await api.get(f"/v1/sessions/{sid}/context")
    assert (refused.status_code, refused.json()["code"]) == (422, "unknown_token_counter")


@pytest.mark.parametrize(
    ("script", "says"),
    [
        ({"hi": {"text": "x"}}, "is not an object"),
        ([5], "is not an object"),
        ([{"tool_calls": "read"}], "has tool_calls that are not objects with a name"),
        ([{"tool_calls": [{"input": {}}]}], "has tool_calls that are not objects with a name"),
        ([{"text": "x", "usage": {"input_tokens": "many"}}], "has a usage that is not whole"),
        ([{"text": "x", "finish_reason": "done"}], "has an unknown finish_reason 'done'"),
    ],
)
async def test_a_stored_script_entry_no_version_writes_fails_the_turn_plainly(
    api: httpx.AsyncClient, script: Any, says: str
) -> None:
    # Registration checks a script; a row written past it used to fail the turn as an
    # internal error (persistence_error).
    sid = await stored_model(api, "odd-script", script=script)

    done = await run_turn(api, sid)

    assert done["status"] == "failed", done
    assert done["outcome"]["code"] == "model_error"
    message = done["outcome"]["message"]
    assert message.startswith("model error: bad_request: scripted model 'odd-script': entry 0 ")
    assert says in message
    assert message.endswith("PUT the model again with a valid script")
