"""Numbers a provider reports and bookkeeping writes never fail a turn, and no failure shows
SQL or driver text.

A provider once reported 2³¹ input tokens: the calibration sample overflowed PostgreSQL's
``integer`` and the turn failed with ``persistence_error`` quoting the ``INSERT``. Now reported
figures are clamped to what every column holds, a calibration sample is best effort, and a
store that does fail says so without its SQL.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from sqlalchemy import text

from app.providers.base import MAX_REPORTED_TOKENS
from app.storage.database import create_engine
from app.storage.migrate import upgrade_to_head
from tests.api.helpers import fake_provider_model, new_session, run_turn
from tests.conftest import client_for, make_settings
from tests.providers.fakes import (
    FakeProviderServer,
    StreamReply,
    anthropic_stream,
    openai_stream,
    openai_usage,
)
from tests.services.compaction.builders import BIG_TEXT, VALID

pytestmark = pytest.mark.anyio

KEY_ENV = "CTXSVC_TEST_FAKE_KEY"
HUGE = 2**31


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviderServer]:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    with FakeProviderServer() as server:
        yield server


async def provider_model(api: httpx.AsyncClient, server: FakeProviderServer, kind: str) -> str:
    return await fake_provider_model(api, server.base_url, kind, max_output_tokens=16_384)


async def test_out_of_range_usage_is_clamped_and_the_turn_completes(
    api: httpx.AsyncClient, provider: FakeProviderServer
) -> None:
    openai = await provider_model(api, provider, "openai_chat")
    sid = await new_session(api, model_id=openai)
    provider.enqueue(
        StreamReply(openai_stream(text=["big"], usage=openai_usage(HUGE, 10**20, cached=-3)))
    )
    turn = await run_turn(api, sid)
    assert (turn["status"], turn["outcome"]) == ("completed", {"final_text": "big"}), turn
    assert turn["usage"] == {
        "input_tokens": MAX_REPORTED_TOKENS,
        "output_tokens": MAX_REPORTED_TOKENS,
        "cached_tokens": 0,
        "cache_creation_tokens": 0,
        "reasoning_tokens": 0,
    }
    calibration = (await api.get(f"/v1/models/{openai}")).json()["calibration"]
    assert calibration["samples"][0]["reported_input_tokens"] == MAX_REPORTED_TOKENS

    # Anthropic's prompt is three figures added up: the sum is clamped too.
    anthropic = await provider_model(api, provider, "anthropic_messages")
    assert (await api.patch(f"/v1/sessions/{sid}", json={"model_id": anthropic})).status_code == 200
    provider.enqueue(
        StreamReply(
            anthropic_stream(
                text=["bigger"], input_tokens=MAX_REPORTED_TOKENS, cache_read=HUGE, output_tokens=1
            )
        )
    )
    turn = await run_turn(api, sid)
    assert turn["status"] == "completed", turn
    assert turn["usage"]["input_tokens"] == MAX_REPORTED_TOKENS
    assert turn["usage"]["cached_tokens"] == MAX_REPORTED_TOKENS


async def test_a_summary_call_reporting_huge_usage_still_installs_its_checkpoint(
    api: httpx.AsyncClient, provider: FakeProviderServer
) -> None:
    summarizer = await provider_model(api, provider, "openai_chat")
    sid = await new_session(api, summary_model_id=summarizer)
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "read it"}]},
        {"role": "assistant", "content": [{"type": "text", "text": BIG_TEXT[:100]}]},
    ]
    assert (
        await api.post(f"/v1/sessions/{sid}/messages", json={"messages": messages})
    ).status_code == 201
    provider.enqueue(StreamReply(openai_stream(text=[VALID], usage=openai_usage(HUGE, HUGE))))
    response = await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    assert response.status_code == 201, response.text
    checkpoint = response.json()
    assert (checkpoint["input_tokens"], checkpoint["output_tokens"]) == (
        MAX_REPORTED_TOKENS,
        MAX_REPORTED_TOKENS,
    )


# -- failures the database produces, each in a database of the test's own ---------------------


@pytest.fixture
async def own_database(empty_database_url: str) -> str:
    await upgrade_to_head(empty_database_url)
    return empty_database_url


async def execute(database_url: str, *statements: str) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            for statement in statements:
                await connection.execute(text(statement))
    finally:
        await engine.dispose()


async def own_api(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async for client in client_for(make_settings(database_url)):
        yield client


async def test_a_calibration_sample_that_cannot_be_written_does_not_fail_the_turn(
    own_database: str, provider: FakeProviderServer, caplog: pytest.LogCaptureFixture
) -> None:
    await execute(own_database, "DROP TABLE calibration_samples")
    async for api in own_api(own_database):
        sid = await new_session(api, model_id=await provider_model(api, provider, "openai_chat"))
        provider.enqueue(StreamReply(openai_stream(text=["fine"], usage=openai_usage(120, 3))))
        turn = await run_turn(api, sid)
        assert (turn["status"], turn["outcome"]) == ("completed", {"final_text": "fine"}), turn
        assert turn["usage"]["input_tokens"] == 120
    assert "calibration sample of model" in caplog.text


REFUSING_TRIGGER: dict[str, tuple[str, ...]] = {
    "sqlite": (
        "CREATE TRIGGER refuse_answers BEFORE INSERT ON messages WHEN NEW.role = 'assistant' "
        "BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END",
    ),
    "postgresql": (
        "CREATE FUNCTION refuse_answers() RETURNS trigger AS $$ BEGIN "
        "RAISE EXCEPTION 'refused by the test trigger'; END $$ LANGUAGE plpgsql",
        "CREATE TRIGGER refuse_answers BEFORE INSERT ON messages FOR EACH ROW "
        "WHEN (NEW.role = 'assistant') EXECUTE FUNCTION refuse_answers()",
    ),
}


async def test_a_store_that_fails_says_so_without_sql_or_driver_text(
    own_database: str, provider: FakeProviderServer, caplog: pytest.LogCaptureFixture
) -> None:
    backend = "postgresql" if own_database.startswith("postgresql") else "sqlite"
    await execute(own_database, *REFUSING_TRIGGER[backend])
    async for api in own_api(own_database):
        sid = await new_session(api, model_id=await provider_model(api, provider, "openai_chat"))
        provider.enqueue(StreamReply(openai_stream(text=["lost"])))
        turn = await run_turn(api, sid)
    assert (turn["status"], turn["outcome"]["code"]) == ("failed", "persistence_error"), turn
    message: str = turn["outcome"]["message"]
    assert message == (
        f"persistence error: turn {turn['turn_id']} stopped on an internal error (logged with "
        "the turn id); start a new turn"
    )
    for leak in ("INSERT", "messages", "trigger", "sqlite", "psycopg", "Traceback", "[SQL"):
        assert leak not in message
    # The log has what the answer leaves out, under the turn's id.
    assert "refused by the test trigger" in caplog.text
    assert turn["turn_id"] in caplog.text
