"""Tool calls the runner must refuse with a result the model sees, never by failing the turn
(spec §6): arguments that are not JSON, a schema that cannot be applied, and
``conversation_history`` arguments no database can take.

A schema whose ``$ref`` resolves to nothing is refused when a session is created
(``test_tool_schema_refs``); sessions stored before that check may still hold one, so those
tests write it into the stored agent directly."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from app.storage.database import create_engine
from tests.api.helpers import run_turn
from tests.api.test_turns import history, result_text, results_of, session_with
from tests.providers.fakes import FakeProviderServer

pytestmark = pytest.mark.anyio

_sessions = sa.table("sessions", sa.column("id"), sa.column("agent", sa.JSON))


async def store_schema(database_url: str, session_id: str, schema: dict[str, Any]) -> None:
    """Give the session's only tool ``schema``, as a session stored before the check could."""
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            agent = (
                await connection.execute(
                    sa.select(_sessions.c.agent).where(_sessions.c.id == session_id)
                )
            ).scalar_one()
            (tool,) = agent["tools"]
            agent["tools"] = [{**tool, "input_schema": schema}]
            await connection.execute(
                sa.update(_sessions).where(_sessions.c.id == session_id).values(agent=agent)
            )
    finally:
        await engine.dispose()


async def only_result(api: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    """The one tool result of a completed turn whose model went on after it."""
    turn = await run_turn(api, sid)
    assert (turn["status"], turn["outcome"]) == ("completed", {"final_text": "continued"}), turn
    messages = await history(api, sid)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    (result,) = results_of(messages)
    assert result["state"] == "error"
    return result


@pytest.mark.parametrize("raw", ['{"path": NaN}', '{"path": -Infinity}', "Infinity"])
async def test_nan_and_infinity_are_not_json(api: httpx.AsyncClient, raw: str) -> None:
    sid = await session_with(
        api,
        [{"tool_calls": [{"name": "anything", "input": raw}]}, {"text": "continued"}],
        tools=[{"name": "anything", "description": "d", "input_schema": {}}],
    )
    text = result_text(await only_result(api, sid))
    assert text.startswith("invalid tool input: ")
    assert "is not valid JSON" in text


@pytest.mark.parametrize(
    ("schema", "reason"),
    [
        ({"$ref": "#/definitions/missing"}, "/definitions/missing"),
        ({"$ref": "#"}, "recurses without end"),
    ],
)
async def test_a_schema_that_cannot_be_applied_is_a_result(
    api: httpx.AsyncClient, database_url: str, schema: dict[str, Any], reason: str
) -> None:
    sid = await session_with(
        api,
        [{"tool_calls": [{"name": "t", "input": {"p": 1}}]}, {"text": "continued"}],
        tools=[{"name": "t", "description": "d", "input_schema": {}}],
    )
    await store_schema(database_url, sid, schema)
    text = result_text(await only_result(api, sid))
    assert text.startswith("tool 't' was not run: its input schema cannot be applied (")
    assert reason in text


async def test_a_ref_to_another_document_is_a_result_and_never_fetched(
    api: httpx.AsyncClient, database_url: str
) -> None:
    with FakeProviderServer() as server:
        schema = {"properties": {"p": {"$ref": f"{server.base_url}/schema.json"}}}
        sid = await session_with(
            api,
            [{"tool_calls": [{"name": "t", "input": {"p": 1}}]}, {"text": "continued"}],
            tools=[{"name": "t", "description": "d", "input_schema": {}}],
        )
        await store_schema(database_url, sid, schema)
        text = result_text(await only_result(api, sid))
        # The agent's schema makes the service send no request anywhere.
        assert server.connections == 0
    assert text.startswith("tool 't' was not run: its input schema cannot be applied (")
    assert f"{server.base_url}/schema.json" in text


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ('{"afterSequence": 9223372036854775808}', "after_sequence must be an integer between"),
        ('{"afterSequence": 1000000000000000000000000000000}', "after_sequence must be"),
        # Escapes in the model's raw arguments: JSON allows them, the databases do not.
        ('{"compactionId": "x\\u0000y"}', "compaction_id must not contain NUL"),
        ('{"compactionId": "\\ud800"}', "compaction_id must not contain NUL or an unpaired"),
    ],
)
async def test_history_arguments_no_database_takes_are_a_result(
    api: httpx.AsyncClient, raw: str, expected: str
) -> None:
    sid = await session_with(
        api,
        [
            {"text": "first"},
            {"tool_calls": [{"name": "conversation_history", "input": raw}]},
            {"text": "continued"},
        ],
    )
    await run_turn(api, sid, "hello")
    assert (
        await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    ).status_code == 201
    turn = await run_turn(api, sid)
    assert (turn["status"], turn["outcome"]) == ("completed", {"final_text": "continued"}), turn
    (result,) = results_of(await history(api, sid))
    assert result["state"] == "error"
    assert result_text(result).startswith(expected)


async def test_a_schema_naming_an_unknown_dialect_checks_by_the_latest_draft(
    api: httpx.AsyncClient,
) -> None:
    # jsonschema only warns about an unknown ``$schema`` today and will raise in the future:
    # the call is held to the schema by the latest draft either way, and the turn goes on.
    schema = {"$schema": "https://example.invalid/dialect", "required": ["path"]}
    sid = await session_with(
        api,
        [{"tool_calls": [{"name": "t", "input": {"p": 1}}]}, {"text": "continued"}],
        tools=[{"name": "t", "description": "d", "input_schema": schema}],
    )
    text = result_text(await only_result(api, sid))
    assert text == (
        "invalid arguments for tool 't': 'path' is a required property (at the top level)"
    )


async def test_a_schema_whose_dialect_is_no_uri_leaves_the_call_to_the_caller(
    api: httpx.AsyncClient,
) -> None:
    # ``$schema`` must be a URI: a number makes the schema itself invalid, so nothing holds
    # the model to it (as for any broken schema) and the call goes to the caller. It used to
    # end the turn with an AttributeError from inside jsonschema.
    schema = {"$schema": 5, "required": ["path"]}
    sid = await session_with(
        api,
        [{"tool_calls": [{"name": "t", "input": {"p": 1}}]}, {"text": "continued"}],
        tools=[{"name": "t", "description": "d", "input_schema": schema}],
    )
    turn = await run_turn(api, sid)
    assert (turn["status"], turn["phase"]) == ("running", "waiting_tool_results"), turn
    assert [c["name"] for c in turn["pending_tool_calls"]] == ["t"]
