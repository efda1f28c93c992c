"""One rule for ids that name nothing: the resource a path names is 404 when it does not
exist; an id anywhere else in the request (body or query) makes the request wrong: 422 with a
code that names the field, and ``field`` saying where it is."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api.helpers import append, new_session, run_turn, session_body, tool_result, user
from tests.api.test_tokens_api import prepare_body
from tests.api.test_turns import call, session_with

pytestmark = pytest.mark.anyio


def refused(response: httpx.Response) -> tuple[int, str, str]:
    body = response.json()
    return response.status_code, body["code"], body["field"]


async def test_a_missing_path_resource_is_404(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    for path, code in [
        ("/v1/sessions/ses-nope", "session_not_found"),
        ("/v1/models/no-such-model", "model_not_found"),
        (f"/v1/sessions/{sid}/compactions/cmp-nope", "compaction_not_found"),
        (f"/v1/sessions/{sid}/turns/turn-nope", "turn_not_found"),
    ]:
        response = await api.get(path)
        assert (response.status_code, response.json()["code"]) == (404, code), path


async def test_a_model_id_in_a_body_that_names_nothing_is_422_naming_the_field(
    api: httpx.AsyncClient,
) -> None:
    created = await api.post("/v1/sessions", json=session_body(model_id="no-such-model"))
    assert refused(created) == (422, "unknown_model_id", "model_id")
    summary = await api.post("/v1/sessions", json=session_body(summary_model_id="no-such-model"))
    assert refused(summary) == (422, "unknown_summary_model_id", "summary_model_id")
    sid = await new_session(api)
    patched = await api.patch(f"/v1/sessions/{sid}", json={"summary_model_id": "no-such-model"})
    assert refused(patched) == (422, "unknown_summary_model_id", "summary_model_id")
    assert (await api.get(f"/v1/sessions/{sid}")).json()["summary_model_id"] == "local"
    body: dict[str, Any] = {**prepare_body(), "model_id": "no-such-model"}
    del body["model"]
    prepared = await api.post("/v1/prepare", json=body)
    assert refused(prepared) == (422, "unknown_model_id", "model_id")
    counted = await api.post("/v1/tokens/count", json={"prepare": body})
    assert refused(counted) == (422, "unknown_model_id", "prepare.model_id")


async def test_a_checkpoint_id_in_a_body_or_query_that_names_nothing_is_422(
    api: httpx.AsyncClient,
) -> None:
    sid = await new_session(api)
    await append(api, sid, user("Fix the parser."))
    assert (
        await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    ).status_code == 201
    url = f"/v1/sessions/{sid}"
    rewind = await api.post(f"{url}/rewind", json={"compaction_id": "cmp-nope"})
    assert refused(rewind) == (422, "unknown_compaction_id", "compaction_id")
    transcript = await api.get(f"{url}/transcript", params={"compaction_id": "cmp-nope"})
    assert refused(transcript) == (422, "unknown_compaction_id", "compaction_id")
    replay = await api.get(f"{url}/replay", params={"selector": "compaction:cmp-nope"})
    assert refused(replay) == (422, "unknown_compaction_id", "selector")
    assert len((await api.get(f"{url}/compactions")).json()["compactions"]) == 1


async def test_a_tool_call_id_that_names_no_waiting_call_is_422(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    appended = await append(api, sid, user("go"), tool_result("never-called"))
    assert refused(appended) == (422, "unknown_tool_call", "messages.1.content.0.id")
    sid = await session_with(api, [{"tool_calls": [call("read", path="a")]}, {"text": "done"}])
    turn = await run_turn(api, sid)
    posted = await api.post(
        f"/v1/sessions/{sid}/turns/{turn['turn_id']}/tool-results",
        json={"results": [{"tool_call_id": "never-called", "state": "success", "output": []}]},
    )
    assert refused(posted) == (422, "unknown_tool_call", "results.0.tool_call_id")
