"""Which calls are repeated, when, and how long the client waits (``Retries``).

The rules are checked against httpx's ``MockTransport`` (the answers a test needs, in order:
a 503 the real service only gives when its database is down); the waiting against the real
service, started after the client's first attempt.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from ctxsvc_client import (
    AsyncClient,
    Client,
    RateLimitedError,
    Retries,
    TransportError,
    UnavailableError,
)
from tests.servers import ServerProcess, clean_env, free_port, uvicorn_command

SESSION = {
    "id": "ses-1",
    "title": None,
    "model_id": "local",
    "summary_model_id": "local",
    "agent": {"system_prompt": "x"},
    "workspace": None,
    "sandbox": {"mode": "auto", "available": True},
    "disabled_skills": [],
    "tool_result_pruned_through_sequence": None,
    "message_count": 0,
    "reload_required": False,
    "usage": {"turns": 0},
    "created_at": "2026-12-01T10:00:00Z",
    "updated_at": "2026-12-01T10:00:00Z",
}
TURN = {
    "turn_id": "turn-1",
    "session_id": "ses-1",
    "client_request_id": "r",
    "status": "running",
    "phase": "starting",
    "input": [],
    "outcome": None,
    "pending_tool_calls": [],
    "plan": None,
    "model_calls": 0,
    "usage": {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "reasoning_tokens": 0},
    "cancel_requested": False,
    "created_at": "2026-12-01T10:00:00Z",
    "updated_at": "2026-12-01T10:00:00Z",
    "finished_at": None,
}
Answer = httpx.Response | Exception


def problem(status: int, code: str, **headers: str) -> httpx.Response:
    body = {"type": code, "title": code, "status": status, "detail": code, "code": code}
    return httpx.Response(status, json=body, headers=headers)


class Script:
    """A transport answering each request with the next scripted answer, recording requests."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def client_of(script: Script, **options: float) -> Client:
    # No waiting between attempts: the rules are under test here, not the clock.
    settings = {"backoff": 0.0, "max_retries": 2, **options}
    return Client("http://service", transport=httpx.MockTransport(script), **settings)  # type: ignore[arg-type]


def test_a_read_is_retried_on_503_and_429_until_it_succeeds() -> None:
    script = Script(
        problem(503, "not_ready"),
        problem(429, "rate_limited", **{"Retry-After": "0"}),
        httpx.Response(200, json=SESSION),
    )
    assert client_of(script).get_session("ses-1").id == "ses-1"
    assert len(script.requests) == 3


def test_retries_stop_after_max_retries_with_the_last_answer() -> None:
    script = Script(*[problem(503, "not_ready")] * 3)
    with pytest.raises(UnavailableError):
        client_of(script).get_session("ses-1")
    assert len(script.requests) == 3  # the call and two retries
    once = Script(problem(429, "rate_limited"))
    with pytest.raises(RateLimitedError):
        client_of(once, max_retries=0).get_session("ses-1")
    assert len(once.requests) == 1


def test_an_append_is_not_repeated_after_it_may_have_arrived() -> None:
    for answer in (problem(503, "unavailable"), httpx.ReadTimeout("slow")):
        script = Script(answer, httpx.Response(201, json={"messages": []}))
        with pytest.raises((UnavailableError, TransportError)):
            client_of(script).append_messages("ses-1", [{"role": "user", "content": []}])
        assert len(script.requests) == 1


def test_any_call_is_repeated_when_the_connection_never_opened() -> None:
    script = Script(httpx.ConnectError("refused"), httpx.Response(201, json={"messages": []}))
    assert client_of(script).append_messages("ses-1", [{"role": "user", "content": []}]) == []
    assert len(script.requests) == 2


def test_a_repeated_turn_start_sends_the_same_client_request_id() -> None:
    script = Script(
        httpx.ReadTimeout("answer lost"),
        problem(503, "unavailable"),
        httpx.Response(202, json=TURN),
    )
    turn = client_of(script).start_turn("ses-1", "Go.")
    assert turn.turn_id == "turn-1"
    ids = {json.loads(r.content)["client_request_id"] for r in script.requests}
    assert len(script.requests) == 3
    assert len(ids) == 1
    assert json.loads(script.requests[0].content)["input"] == [{"type": "text", "text": "Go."}]


def test_a_long_retry_after_is_not_waited_for() -> None:
    script = Script(problem(429, "rate_limited", **{"Retry-After": "3600"}))
    with pytest.raises(RateLimitedError) as caught:
        client_of(script).get_session("ses-1")
    assert caught.value.retry_after == 3600.0
    assert len(script.requests) == 1


@pytest.mark.parametrize(
    ("retry", "expected"),
    [(1, (0.25, 0.5)), (2, (0.5, 1.0)), (3, (1.0, 2.0)), (6, (4.0, 8.0)), (9, (4.0, 8.0))],
)
def test_backoff_doubles_with_jitter_up_to_its_ceiling(
    retry: int, expected: tuple[float, float]
) -> None:
    policy = Retries(max_retries=10, backoff=0.5, max_backoff=8.0)
    delays = [policy.delay(retry) for _ in range(200)]
    low, high = expected
    assert all(low <= d <= high for d in delays)
    assert policy.delay(retry, retry_after=3.0) == 3.0


def test_api_key_and_user_agent_go_in_headers_never_in_the_url() -> None:
    script = Script(httpx.Response(200, json=SESSION))
    Client(
        "http://service/", api_key="secret-key", transport=httpx.MockTransport(script)
    ).get_session("ses/1 ü")
    (request,) = script.requests
    assert request.headers["authorization"] == "Bearer secret-key"
    assert request.headers["user-agent"].startswith("ctxsvc-client/")
    assert "secret-key" not in str(request.url)
    assert request.url.raw_path == b"/v1/sessions/ses%2F1%20%C3%BC"


@pytest.fixture
def unstarted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    port = free_port()
    server = ServerProcess(
        uvicorn_command(port),
        clean_env(CTXSVC_JSON_LOGS="false"),
        cwd=tmp_path_factory.mktemp("late-server"),
    )
    try:
        yield server
    finally:
        server.stop()


def test_a_client_waits_out_a_service_that_is_still_starting(unstarted: ServerProcess) -> None:
    # Generous retries with a short ceiling: the service answers within its start time.
    with Client(unstarted.url, max_retries=600, backoff=0.05, max_backoff=0.1) as client:
        unstarted.launch()  # not waited for: the client's first attempts are refused
        session = client.create_session(model_id="local", agent={"system_prompt": "Hi."})
        assert client.get_session(session.id).id == session.id


@pytest.mark.anyio
async def test_the_async_client_retries_alike() -> None:
    script = Script(problem(503, "not_ready"), httpx.Response(200, json=SESSION))
    transport = httpx.MockTransport(script)
    async with AsyncClient("http://service", transport=transport, backoff=0.0) as client:
        assert (await client.get_session("ses-1")).id == "ses-1"
    assert len(script.requests) == 2
