"""The ``ctxsvc serve`` console script as a newcomer and an operator run it.

README's first command (``ctxsvc serve``) must work in an empty directory: the SQLite file is
created and migrated under ``./data/`` on first start. Its logs are one JSON object per line with
the request id, and never carry an API key or message content at info level.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.api.helpers import session_body, user
from tests.providers.fakes import FakeProviderServer, StreamReply, openai_stream
from tests.servers import clean_env, free_port, running, serve_command

pytestmark = pytest.mark.slow

KEY = "ops-test-key-7c1d9e5a3b8f4a26"


def test_readme_first_command_serves_swagger_ui_on_a_fresh_checkout(tmp_path: Path) -> None:
    with running([serve_command(free_port())], env=clean_env(), cwd=tmp_path) as [server]:
        assert (tmp_path / "data" / "ctxsvc.db").is_file()
        with httpx.Client(base_url=server.url, timeout=10.0) as client:
            docs = client.get("/docs")
            assert docs.status_code == 200
            assert docs.headers["content-type"].startswith("text/html")
            assert "swagger-ui" in docs.text.lower()
            spec = client.get("/openapi.json")
            assert spec.status_code == 200
            assert spec.json()["info"]["title"] == "ctxsvc"
            # The default setup serves the API, not just the docs.
            assert client.post("/v1/sessions", json=session_body()).status_code == 201


def test_logs_are_json_lines_with_request_ids_and_no_secrets_or_content(tmp_path: Path) -> None:
    marker = "MARKER-5e0b7d1c-private-user-text"
    env = clean_env(CTXSVC_API_KEYS=json.dumps([KEY]), CTXSVC_LOG_LEVEL="INFO")
    with running([serve_command(free_port())], env=env, cwd=tmp_path) as [server]:
        auth = {"Authorization": f"Bearer {KEY}"}
        with httpx.Client(base_url=server.url, timeout=10.0, headers=auth) as client:
            created = client.post(
                "/v1/sessions", json=session_body(title=marker), headers={"X-Request-ID": "req-1"}
            )
            assert created.status_code == 201
            session_id = created.json()["id"]
            appended = client.post(
                f"/v1/sessions/{session_id}/messages",
                json={"messages": [user(marker)]},
                headers={"X-Request-ID": "req-2"},
            )
            assert appended.status_code == 201
            refused = client.post(  # an error path logs too
                f"/v1/sessions/{session_id}/messages",
                json={"messages": [user(marker), {"role": "tool", "content": []}]},
                headers={"X-Request-ID": "req-3"},
            )
            assert refused.status_code in {400, 409, 422}
            wrong_key = client.get("/v1/sessions", headers={"Authorization": f"Bearer {KEY}-wrong"})
            assert wrong_key.status_code == 401
            generated = wrong_key.headers["x-request-id"]
    log = server.log()  # complete: the server has stopped

    assert KEY not in log
    assert marker not in log
    # The console script prints one plain banner line (the Swagger UI address) before logging
    # is configured; every other line is a JSON object carrying a request id.
    lines = [line for line in log.splitlines() if line and not line.startswith("ctxsvc: ")]
    entries = [json.loads(line) for line in lines]
    assert all("request_id" in e and "level" in e and "message" in e for e in entries)
    access = [e for e in entries if e["logger"] == "ctxsvc.access"]
    by_id = {e["request_id"]: e for e in access}
    assert by_id["req-1"]["route"] == "/v1/sessions"
    assert by_id["req-2"]["route"] == "/v1/sessions/{session_id}/messages"
    assert by_id["req-2"]["status"] == 201
    assert by_id["req-3"]["status"] == refused.status_code
    assert by_id[generated]["status"] == 401
    # Lines outside a request (start-up, shutdown) say so instead of inventing an id.
    assert any(e["request_id"] == "-" for e in entries)


def test_a_model_call_adds_no_log_line_of_its_own(tmp_path: Path) -> None:
    # httpx logs every request at INFO; a server at INFO keeps only its own records.
    env = clean_env(CTXSVC_LOG_LEVEL="INFO", OPS_TEST_PROVIDER_KEY="sk-ops")
    with (
        FakeProviderServer() as provider,
        running([serve_command(free_port())], env=env, cwd=tmp_path) as [server],
    ):
        provider.enqueue(StreamReply(openai_stream(text=["answer"])))
        model = {
            "context_window_tokens": 100_000,
            "max_output_tokens": 1000,
            "provider": {
                "kind": "openai_chat",
                "base_url": provider.base_url + "/v1",
                "model_name": "fake",
                "api_key_env": "OPS_TEST_PROVIDER_KEY",
            },
        }
        with httpx.Client(base_url=server.url, timeout=10.0) as client:
            assert client.put("/v1/models/ops-fake", json=model).status_code == 201
            created = client.post("/v1/sessions", json=session_body(model_id="ops-fake"))
            turn = client.post(
                f"/v1/sessions/{created.json()['id']}/turns",
                params={"wait": "true"},
                json={"client_request_id": "r1", "input": [{"type": "text", "text": "go"}]},
            )
            assert turn.json()["outcome"] == {"final_text": "answer"}, turn.text
    assert len(provider.requests) == 1
    loggers = {json.loads(line)["logger"] for line in server.log().splitlines() if line[:1] == "{"}
    assert "ctxsvc.access" in loggers
    assert "httpx" not in loggers
