"""A SIGKILLed process, restarted on the same host, frees the session its turn held at once
(spec §6): it proves the lease holder gone (same host, boot and pid namespace; that pid no
longer runs the process that started then) instead of waiting for the lease to expire."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.helpers import new_session
from tests.api.test_turns import agent
from tests.providers.fakes import FakeProviderServer, StreamReply, openai_stream
from tests.servers import ServerProcess, clean_env, free_port, uvicorn_command

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

FAKE_KEY_ENV = "CTXSVC_TEST_FAKE_KEY"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def slow_provider() -> Iterator[FakeProviderServer]:
    with FakeProviderServer(latency=60.0) as server:
        yield server


async def test_a_restart_after_sigkill_frees_the_session_at_once(
    database_url: str, slow_provider: FakeProviderServer, tmp_path: Path
) -> None:
    env = clean_env(
        CTXSVC_DATABASE_URL=database_url,
        CTXSVC_MIGRATE_ON_START="false",
        CTXSVC_JSON_LOGS="false",
        # Ten minutes: only the proof can free the session before the test ends.
        CTXSVC_TURN_LEASE_SECONDS="600",
        **{FAKE_KEY_ENV: "sk-test"},
    )
    server = ServerProcess(
        uvicorn_command(free_port()), env, cwd=tmp_path, log_path=tmp_path / "server.log"
    )
    server.start()
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as api:
            model_id = f"fake-{uuid.uuid4().hex[:8]}"
            model = {
                "context_window_tokens": 100_000,
                "max_output_tokens": 1000,
                "provider": {
                    "kind": "openai_chat",
                    "base_url": slow_provider.base_url + "/v1",
                    "model_name": "gpt-fake",
                    "api_key_env": FAKE_KEY_ENV,
                },
            }
            assert (await api.put(f"/v1/models/{model_id}", json=model)).status_code == 201
            slow_provider.enqueue(StreamReply(openai_stream(text=["never delivered"])))
            sid = await new_session(api, model_id=model_id, agent=agent())
            body = {"client_request_id": "crash", "input": [{"type": "text", "text": "go"}]}
            started = await api.post(f"/v1/sessions/{sid}/turns", json=body)
            assert started.status_code == 202, started.text
            tid = started.json()["turn_id"]
            await slow_provider.arrived()  # the model call is pending: the lease is held
        server.kill()
        server.start()  # the same command on the same host: its predecessor is provably gone
        async with httpx.AsyncClient(base_url=server.url, timeout=30) as api:
            turn = (await api.get(f"/v1/sessions/{sid}/turns/{tid}")).json()
            assert turn["status"] == "interrupted", turn
            assert turn["outcome"]["code"] == "process_restart"
            again = await api.post(
                f"/v1/sessions/{sid}/turns",
                json={"client_request_id": "after", "input": [{"type": "text", "text": "hi"}]},
            )
            assert again.status_code == 202, again.text  # not 409 busy
    finally:
        server.stop()
    assert "is gone" in server.log()
