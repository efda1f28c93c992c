"""The output reserve (spec §3.2): what each request keeps of the window for the answer and
sends as its output limit, distinct from the model's ceiling, so that no catalogue model
compacts a conversation of one message — and every figure of the catalogue is the one
``docs/models.md`` states."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.services.catalogue import CATALOGUE
from tests.api.helpers import new_session, prepare_session, user

pytestmark = pytest.mark.anyio

MODELS_DOC = Path(__file__).resolve().parents[2] / "docs" / "models.md"


def hello(**model: Any) -> dict[str, Any]:
    return {"conversation": [user("Hello")], **model}


@pytest.mark.parametrize("model_id", sorted(CATALOGUE))
async def test_no_catalogue_model_reaches_the_trigger_with_one_message(
    stateless_client: httpx.AsyncClient, model_id: str
) -> None:
    response = await stateless_client.post(
        "/v1/prepare", json=hello(model_id=model_id, encode=None)
    )
    assert response.status_code == 200, response.text
    answer = response.json()
    budget = answer["budget"]
    assert budget["reaches_auto_compact_limit"] is False, budget
    # The reserve is what the request asks the model for, and at most its ceiling.
    assert answer["request"]["max_output_tokens"] == budget["reserved_output_tokens"]
    assert budget["reserved_output_tokens"] <= CATALOGUE[model_id].capabilities.max_output_tokens


async def test_o3_keeps_a_modest_reserve_and_sends_it_as_the_output_limit(
    stateless_client: httpx.AsyncClient,
) -> None:
    # 100 000 of output in a 200 000 window: reserved in full, the trigger line (85 % of the
    # 100 000 left) was below the reserve itself, so "Hello" compacted.
    response = await stateless_client.post(
        "/v1/prepare", json=hello(model_id="o3", encode="openai_chat")
    )
    answer = response.json()
    budget = answer["budget"]
    assert budget["reserved_output_tokens"] == 32_768
    assert budget["effective_input_tokens"] == 200_000 - 32_768
    assert budget["auto_compact_token_limit"] == 142_148
    assert budget["reaches_auto_compact_limit"] is False
    assert answer["provider_payload"]["max_completion_tokens"] == 32_768


@pytest.mark.parametrize(
    ("window", "output", "reserve", "effective", "limit"),
    [
        (1000, 400, 400, 600, 510),  # the spec's worked example, unchanged
        (200_000, 32_000, 32_000, 168_000, 142_800),  # unchanged
        (200_000, 100_000, 32_768, 167_232, 142_148),  # the ceiling is half the window
        (16_384, 8_192, 6_553, 9_831, 8_357),  # a small window: 40 % of it
    ],
)
async def test_the_default_reserve_of_an_inline_model(
    stateless_client: httpx.AsyncClient,
    window: int,
    output: int,
    reserve: int,
    effective: int,
    limit: int,
) -> None:
    model = {"context_window_tokens": window, "max_output_tokens": output}
    answer = (await stateless_client.post("/v1/prepare", json=hello(model=model))).json()
    budget = answer["budget"]
    assert (budget["reserved_output_tokens"], answer["request"]["max_output_tokens"]) == (
        reserve,
        reserve,
    )
    assert (budget["effective_input_tokens"], budget["auto_compact_token_limit"]) == (
        effective,
        limit,
    )
    assert budget["reaches_auto_compact_limit"] is False


@pytest.mark.parametrize(
    ("reserve", "status", "code"),
    [
        (400, 200, None),  # equal to the ceiling
        (401, 422, "invalid_capabilities"),  # one over
        (1, 200, None),
        (0, 422, "invalid_request"),
    ],
)
async def test_a_stated_reserve_is_at_most_the_ceiling(
    stateless_client: httpx.AsyncClient, reserve: int, status: int, code: str | None
) -> None:
    model = {"context_window_tokens": 1000, "max_output_tokens": 400}
    model["output_reserve_tokens"] = reserve
    response = await stateless_client.post("/v1/prepare", json=hello(model=model))
    assert response.status_code == status, response.text
    if code is not None:
        assert response.json()["code"] == code
    else:
        budget = response.json()["budget"]
        assert budget["reserved_output_tokens"] == reserve
        assert budget["effective_input_tokens"] == 1000 - reserve


async def test_a_registered_model_states_its_reserve_and_the_one_in_force(
    api: httpx.AsyncClient,
) -> None:
    body: dict[str, Any] = {
        "context_window_tokens": 200_000,
        "max_output_tokens": 100_000,
        "provider": {"kind": "local"},
    }
    default = (await api.put("/v1/models/reserve-default", json=body)).json()
    assert (default["output_reserve_tokens"], default["reserved_output_tokens"]) == (None, 32_768)
    assert default["effective_input_tokens"] == 167_232
    stated = (
        await api.put("/v1/models/reserve-stated", json={**body, "output_reserve_tokens": 8_000})
    ).json()
    assert (stated["output_reserve_tokens"], stated["reserved_output_tokens"]) == (8_000, 8_000)
    assert stated["effective_input_tokens"] == 192_000
    assert (await api.get("/v1/models/reserve-stated")).json() == stated


async def test_a_session_prepare_sends_the_reserve_and_its_summary_request_16384(
    api: httpx.AsyncClient,
) -> None:
    body = {"context_window_tokens": 200_000, "max_output_tokens": 100_000}
    assert (
        await api.put("/v1/models/o3-local", json={**body, "provider": {"kind": "local"}})
    ).status_code in (200, 201)
    sid = await new_session(api, model_id="o3-local", summary_model_id="o3-local")
    await api.post(f"/v1/sessions/{sid}/messages", json={"messages": [user("Hello")]})
    prepared = (await prepare_session(api, sid)).json()
    assert prepared["budget"]["reaches_auto_compact_limit"] is False
    assert prepared["request"]["max_output_tokens"] == 32_768
    assert (await api.get(f"/v1/sessions/{sid}/compactions")).json()["compactions"] == []
    summary = (await api.get(f"/v1/sessions/{sid}/compactions/request")).json()
    assert summary["request"]["max_output_tokens"] == 16_384
    assert summary["budget"]["reserved_output_tokens"] == 16_384


def documented_rows() -> dict[str, list[int]]:
    """The catalogue table of docs/models.md (the rows of one model id and figures alone):
    model id → its figures, in column order."""
    rows: dict[str, list[int]] = {}
    for line in MODELS_DOC.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^\| `([^`]+)` \|([\d |]+)\|$", line)
        if match:
            cells = [c.replace(" ", "") for c in match.group(2).split("|")]
            rows[match.group(1)] = [int(c) for c in cells]
    return rows


async def test_the_documented_table_is_the_catalogue(api: httpx.AsyncClient) -> None:
    models = {m["id"]: m for m in (await api.get("/v1/models")).json() if m["builtin"]}
    expected = {}
    for model_id, m in models.items():
        line = min(m["auto_compact_token_limit"], m["effective_input_tokens"])
        expected[model_id] = [
            m["context_window_tokens"],
            m["max_output_tokens"],
            m["reserved_output_tokens"],
            m["fixed_reserve_tokens"],
            m["effective_input_tokens"],
            m["auto_compact_token_limit"],
            line - m["reserved_output_tokens"],
        ]
    assert documented_rows() == expected


@pytest.mark.parametrize(
    ("model_id", "window", "ceiling", "effective"),
    # LiteLLM's model table (BerriAI/litellm, model_prices_and_context_window.json, 2026-12-05):
    # gpt-5-codex 272 000 input + 128 000 output; o3-pro a 200 000 window, 100 000 output.
    [("gpt-5-codex", 400_000, 128_000, 272_000), ("o3-pro", 200_000, 100_000, 167_232)],
)
async def test_the_responses_only_models_have_their_published_limits(
    api: httpx.AsyncClient, model_id: str, window: int, ceiling: int, effective: int
) -> None:
    model = (await api.get(f"/v1/models/{model_id}")).json()
    assert model["provider"]["kind"] == "openai_responses"  # the Responses API only
    assert (model["context_window_tokens"], model["max_output_tokens"]) == (window, ceiling)
    assert model["effective_input_tokens"] == effective
    assert model["reasoning"] is True
