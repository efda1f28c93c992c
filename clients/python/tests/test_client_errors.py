"""Error answers of the real service become exceptions of their family, with the whole problem."""

from __future__ import annotations

import httpx
import pytest

from client_support import API_KEY, scripted, tool_call
from ctxsvc_client import (
    AuthenticationError,
    BusyError,
    Client,
    ConflictError,
    CtxsvcError,
    InvalidInputError,
    NotFoundError,
    ProblemError,
    ProviderError,
    RateLimitedError,
    UnavailableError,
)
from ctxsvc_client._errors import problem_from_response
from tests.servers import ServerProcess

AGENT = {"system_prompt": "You are an agent.", "tools": [{"name": "ls"}]}


@pytest.fixture
def client(server: ServerProcess) -> Client:
    with Client(server.url, timeout=30, max_retries=0) as client:
        yield client  # type: ignore[misc]


def test_an_unknown_session_is_not_found_with_code_detail_and_body(client: Client) -> None:
    with pytest.raises(NotFoundError) as caught:
        client.get_session("ses-missing")
    error = caught.value
    assert (error.status, error.code) == (404, "session_not_found")
    assert "ses-missing" in error.detail
    assert error.body["status"] == 404
    assert error.body["type"].endswith("/session_not_found")
    assert isinstance(error, ProblemError)
    assert isinstance(error, CtxsvcError)


def test_a_request_the_schema_refuses_is_invalid_input_with_the_errors(client: Client) -> None:
    with pytest.raises(InvalidInputError) as caught:
        client.create_session(model_id="local", agent={"system_prompt": ""})
    assert caught.value.status == 422
    assert caught.value.code == "invalid_request"
    assert caught.value.body["errors"][0]["loc"][-1] == "system_prompt"
    session = client.create_session(model_id="local", agent=AGENT)
    with pytest.raises(InvalidInputError) as empty:
        client.start_turn(session.id, [])
    assert empty.value.code == "empty_input"


def test_a_second_turn_while_one_runs_is_busy_naming_the_running_turn(
    client: Client, server: ServerProcess
) -> None:
    model_id = scripted(server, [{"tool_calls": [tool_call("ls")]}])
    session = client.create_session(model_id=model_id, agent=AGENT)
    running = client.start_turn(session.id, "first", wait=True)
    assert running.waiting_for_tools
    with pytest.raises(BusyError) as caught:
        client.start_turn(session.id, "second")
    assert caught.value.status == 409
    assert caught.value.turn_id == running.turn_id
    assert isinstance(caught.value, ConflictError)
    with pytest.raises(ConflictError) as active:  # a conflict that is not "busy"
        client.compact(session.id, summary="x")
    assert active.value.code == "session_active"
    assert not isinstance(active.value, BusyError)


def test_an_id_in_a_body_that_names_nothing_is_invalid_input_naming_the_field(
    client: Client,
) -> None:
    with pytest.raises(InvalidInputError) as model:
        client.create_session(model_id="no-such-model", agent=AGENT)
    assert (model.value.status, model.value.code) == (422, "unknown_model_id")
    assert model.value.body["field"] == "model_id"
    session = client.create_session(model_id="local", agent=AGENT)
    client.run_turn(session.id, "Something to compact.")
    client.compact(session.id, allow_larger=True)
    with pytest.raises(InvalidInputError) as rewind:
        client.rewind(session.id, "cmp-nope")
    assert (rewind.value.code, rewind.value.body["field"]) == (
        "unknown_compaction_id",
        "compaction_id",
    )


def test_a_request_id_reused_with_another_input_is_invalid_input_naming_the_turn(
    client: Client, server: ServerProcess
) -> None:
    session = client.create_session(model_id=scripted(server, [{"text": "Done."}]), agent=AGENT)
    first = client.start_turn(session.id, "Fix it.", client_request_id="req-1", wait=True)
    with pytest.raises(InvalidInputError) as caught:
        client.start_turn(session.id, "Break it.", client_request_id="req-1")
    assert (caught.value.status, caught.value.code) == (422, "client_request_id_reused")
    assert caught.value.body["turn_id"] == first.turn_id
    again = client.start_turn(session.id, "Fix it.", client_request_id="req-1")
    assert again.turn_id == first.turn_id


def test_a_failing_summary_model_is_a_provider_error(client: Client, server: ServerProcess) -> None:
    broken = scripted(server, [{"error": "server_error"}] * 3)
    session = client.create_session(model_id="local", summary_model_id=broken, agent=AGENT)
    client.run_turn(session.id, "Something to summarize.")
    with pytest.raises(ProviderError) as caught:
        client.compact(session.id, allow_larger=True)
    assert caught.value.status == 502
    assert caught.value.code in ("summary_retries_exhausted", "summary_model_error")


def test_a_keyed_service_refuses_a_missing_key_and_serves_the_right_one(
    keyed_server: ServerProcess,
) -> None:
    with Client(keyed_server.url, max_retries=0) as anonymous:
        assert anonymous.health() == {"status": "ok"}  # open, as on the service
        with pytest.raises(AuthenticationError) as caught:
            anonymous.list_sessions()
    assert (caught.value.status, caught.value.code) == (401, "unauthorized")
    with (
        Client(keyed_server.url, api_key="wrong", max_retries=0) as wrong,
        pytest.raises(AuthenticationError),
    ):
        wrong.list_models()
    with Client(keyed_server.url, api_key=API_KEY) as keyed:
        session = keyed.create_session(model_id="local", agent=AGENT)
        assert keyed.get_session(session.id).id == session.id


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, InvalidInputError),
        (413, InvalidInputError),
        (415, InvalidInputError),
        (429, RateLimitedError),
        (500, UnavailableError),
        (503, UnavailableError),
        (504, ProviderError),
        (418, InvalidInputError),
    ],
)
def test_each_status_maps_to_its_family(status: int, cls: type[ProblemError]) -> None:
    response = httpx.Response(
        status,
        json={"type": "t", "title": "x", "status": status, "detail": "what", "code": "c"},
        headers={"retry-after": "7"},
        request=httpx.Request("GET", "http://service/v1/models"),
    )
    error = problem_from_response(response)
    assert type(error) is cls
    assert (error.status, error.code, error.detail) == (status, "c", "what")
    if isinstance(error, RateLimitedError):
        assert error.retry_after == 7.0


def test_an_answer_that_is_not_a_problem_still_raises_with_its_status() -> None:
    response = httpx.Response(
        502, text="<html>bad gateway</html>", request=httpx.Request("GET", "http://service/")
    )
    error = problem_from_response(response)
    assert type(error) is ProviderError
    assert (error.status, error.code, error.body) == (502, None, {})
    assert error.detail == "Bad Gateway"
