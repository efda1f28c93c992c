"""An unexpected error is one problem+json 500 and the connection stays usable,
in a real uvicorn process over one keep-alive connection.

Starlette's last handler used to send its 500 and raise the exception on to the server, which
then closed the connection: the client's next request on it was reset.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from starlette.types import Message, Receive, Scope, Send

from app.api.problems import UnexpectedErrors
from tests.servers import PYTHON, REPO_ROOT, clean_env, free_port, running


def faulty_command(port: int) -> list[str]:
    app = ["-m", "uvicorn", "tests.ops.faulty_app:app", "--log-level", "warning"]
    return [str(PYTHON), *app, "--host", "127.0.0.1", "--port", str(port)]


def local_port(response: httpx.Response) -> int:
    """The client side of the TCP connection that carried ``response``."""
    return int(response.extensions["network_stream"].get_extra_info("client_addr")[1])


@pytest.mark.slow
def test_a_bug_is_one_500_with_its_request_id_and_the_connection_lives_on(
    tmp_path: Path,
) -> None:
    env = clean_env(
        CTXSVC_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path / 'ctxsvc.db'}",
        CTXSVC_JSON_LOGS="true",
        PYTHONPATH=str(REPO_ROOT),  # the app module lives in the tests package
    )
    with (
        running([faulty_command(free_port())], env=env, cwd=tmp_path) as [server],
        httpx.Client(base_url=server.url, timeout=10.0) as client,
    ):
        before = client.get("/healthz")
        ports = [local_port(before)]
        failed = client.get("/v1/test-bug", headers={"X-Request-ID": "req-bug-1"})
        ports.append(local_port(failed))
        after = client.get("/v1/sessions")
        ports.append(local_port(after))
        generated = client.get("/v1/test-bug")
        ports.append(local_port(generated))
    assert failed.status_code == 500
    assert failed.headers["content-type"] == "application/problem+json"
    body = failed.json()
    assert (body["code"], body["status"], body["request_id"]) == (
        "internal_error",
        500,
        "req-bug-1",
    )
    assert body["detail"] == ("An unexpected error occurred; it was logged as request req-bug-1.")
    assert "a bug" not in failed.text  # the exception's text stays in the log
    assert failed.headers["x-request-id"] == "req-bug-1"
    # The same connection answered everything, before and after the failure.
    assert after.status_code == 200
    assert len(set(ports)) == 1, ports
    assert generated.json()["request_id"] == generated.headers["x-request-id"]

    lines = [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]
    (error,) = [e for e in lines if e["level"] == "ERROR" and e["request_id"] == "req-bug-1"]
    assert error["message"] == "unexpected error in GET /v1/test-bug (request req-bug-1)"
    assert "RuntimeError: a bug the handlers do not know" in error["exception"]
    (access,) = [
        e for e in lines if e["logger"] == "ctxsvc.access" and e["request_id"] == "req-bug-1"
    ]
    assert access["status"] == 500
    # The server itself saw nothing to report: the request ended like any other.
    assert "Exception in ASGI application" not in server.log()


@pytest.mark.anyio
async def test_a_stream_that_fails_midway_is_ended_not_raised() -> None:
    async def streams_then_fails(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"data: 1\n\n", "more_body": True})
        raise RuntimeError("the stream's source broke")

    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope: Scope = {"type": "http", "method": "GET", "path": "/s", "headers": []}
    await UnexpectedErrors(streams_then_fails)(scope, receive, send)  # no exception escapes
    assert [m["type"] for m in sent] == [
        "http.response.start",
        "http.response.body",
        "http.response.body",
    ]
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
