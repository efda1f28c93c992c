"""Every integer the API takes has a bound both engines can store, and values are taken as the
schema types them: no ``"20"`` for 20, no ``0`` for false, no ``false`` for 0.
Refusals are 422 ``invalid_request`` and store nothing; on both engines."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.api.schemas.fields import MAX_EXACT_INT, MAX_INT32
from tests.api.helpers import new_session, session_body

pytestmark = pytest.mark.anyio

CAPABILITIES = (
    "context_window_tokens",
    "max_output_tokens",
    "max_reasoning_tokens",
    "fixed_reserve_tokens",
    "safety_margin_tokens",
)


def model(**overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "context_window_tokens": 10_000,
        "max_output_tokens": 1_000,
        "provider": {"kind": "local"},
    }
    body.update(overrides)
    return body


def assert_invalid(response: httpx.Response, field: str) -> None:
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["code"] == "invalid_request"
    assert field in problem["detail"]


async def test_the_largest_storable_window_is_kept_on_both_engines(api: httpx.AsyncClient) -> None:
    response = await api.put("/v1/models/huge", json=model(context_window_tokens=MAX_INT32))
    assert response.status_code == 201, response.text
    assert (await api.get("/v1/models/huge")).json()["context_window_tokens"] == MAX_INT32


@pytest.mark.parametrize("field", CAPABILITIES)
async def test_a_capability_past_the_bound_is_refused(api: httpx.AsyncClient, field: str) -> None:
    window = {"context_window_tokens": MAX_INT32} if field != "context_window_tokens" else {}
    response = await api.put("/v1/models/too-big", json=model(**window, **{field: MAX_INT32 + 1}))
    assert_invalid(response, field)
    assert (await api.get("/v1/models/too-big")).status_code == 404  # nothing stored


async def test_the_stateless_model_is_bounded_too(api: httpx.AsyncClient) -> None:
    caps = {"context_window_tokens": 2**31, "max_output_tokens": 10}
    assert_invalid(await api.post("/v1/prepare", json={"model": caps}), "context_window_tokens")


async def test_scripted_usage_numbers_are_bounded(api: httpx.AsyncClient) -> None:
    entry = {"text": "hi", "usage": {"input_tokens": MAX_INT32 + 1}}
    body = model(provider={"kind": "scripted", "script": [entry]})
    assert_invalid(await api.put("/v1/models/usage", json=body), "input_tokens")
    entry["usage"] = {"input_tokens": MAX_INT32}
    assert (await api.put("/v1/models/usage", json=body)).status_code == 201


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/prepare", {"tool_result_pruning": {"through_sequence": 2**63}}, "through_sequence"),
        (
            "/v1/prepare",
            {
                "conversation": [
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "x"}],
                        "origin": {"type": "real", "message_id": "m", "sequence": 2**63},
                    }
                ]
            },
            "sequence",
        ),
    ],
)
async def test_sequences_are_signed_64_bit(
    api: httpx.AsyncClient, path: str, body: dict[str, Any], field: str
) -> None:
    payload = {"model_id": "local", **body}
    assert_invalid(await api.post(path, json=payload), field)


async def test_expected_sequence_of_a_compaction_is_bounded(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    response = await api.post(
        f"/v1/sessions/{sid}/compactions", json={"expected_through_message_sequence": 2**63}
    )
    assert_invalid(response, "expected_through_message_sequence")


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"sandbox": {"available": 0}}, "available"),
        ({"sandbox": {"available": "true"}}, "available"),
        ({"agent": {"system_prompt": "p", "max_model_calls": "20"}}, "max_model_calls"),
        ({"agent": {"system_prompt": "p", "max_model_calls": True}}, "max_model_calls"),
        ({"agent": {"system_prompt": "p", "doom_loop_threshold": 2.5}}, "doom_loop_threshold"),
    ],
)
async def test_no_coercion_between_booleans_numbers_and_strings(
    api: httpx.AsyncClient, overrides: dict[str, Any], field: str
) -> None:
    response = await api.post("/v1/sessions", json=session_body(**overrides))
    assert_invalid(response, field)


async def test_an_integer_written_with_a_zero_fraction_is_an_integer(
    api: httpx.AsyncClient,
) -> None:
    # JSON Schema's `integer` is any number without a fractional part: 20.0 is one.
    agent = {"system_prompt": "p", "max_model_calls": 20.0}
    response = await api.post("/v1/sessions", json=session_body(agent=agent))
    assert response.status_code == 201, response.text
    assert response.json()["agent"]["max_model_calls"] == 20


@pytest.mark.parametrize("value", [False, "0", 0.5])
async def test_through_sequence_takes_only_integers(api: httpx.AsyncClient, value: Any) -> None:
    body = {"model_id": "local", "tool_result_pruning": {"through_sequence": value}}
    assert_invalid(await api.post("/v1/prepare", json=body), "through_sequence")


async def test_query_bounds(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    for params in ({"after_sequence": MAX_EXACT_INT + 1}, {"after_sequence": -1}):
        response = await api.get(f"/v1/sessions/{sid}/messages", params=params)
        assert response.status_code == 422, response.text
    ok = await api.get(f"/v1/sessions/{sid}/messages", params={"after_sequence": MAX_EXACT_INT})
    assert ok.status_code == 200
