"""Calibration (spec §3.4): the provider's reported input tokens next to our estimate."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from app.container import Container
from app.core.content import text_block
from app.core.counting import ESTIMATE
from app.main import create_app
from app.services.calibration import (
    WINDOW,
    CalibratedCounter,
    Sample,
    record_calibration,
    summarize,
)
from app.storage.database import unit_of_work
from app.storage.repositories.registry import CalibrationRepository
from tests.api.helpers import new_session, text
from tests.conftest import make_settings

pytestmark = pytest.mark.anyio

NOW = datetime(2025, 6, 1, tzinfo=UTC)


def samples(*pairs: tuple[int, int]) -> list[Sample]:
    """Newest first, as the repository returns them."""
    return [Sample(estimated, reported, NOW) for estimated, reported in pairs]


def test_over_reporting_gives_a_ratio_above_one_with_its_spread() -> None:
    calibration = summarize("m", "estimate", samples((1000, 1200), (1000, 1100), (2000, 2600)))
    assert calibration is not None
    assert calibration.ratio == 1.2
    assert (calibration.min_ratio, calibration.max_ratio) == (1.1, 1.3)
    assert calibration.stddev == 0.0816  # population stddev of 1.2, 1.1, 1.3
    assert calibration.sample_count == 3
    assert calibration.to_json()["samples"][0] == {
        "estimated_input_tokens": 1000,
        "reported_input_tokens": 1200,
        "ratio": 1.2,
        "created_at": "2025-06-01T00:00:00Z",
    }


def test_under_reporting_gives_a_ratio_below_one() -> None:
    calibration = summarize("m", "estimate", samples((1000, 800), (400, 300), (500, 450)))
    assert calibration is not None
    assert calibration.ratio == round((0.8 + 0.75 + 0.9) / 3, 4) == 0.8167
    assert (calibration.min_ratio, calibration.max_ratio) == (0.75, 0.9)


def test_only_the_newest_window_counts_and_unusable_samples_are_ignored() -> None:
    newest = [(100, 150)] * WINDOW
    older = [(100, 50)] * 5
    calibration = summarize("m", "estimate", samples((0, 10), (100, 0), *newest, *older))
    assert calibration is not None
    assert calibration.ratio == 1.5
    assert calibration.sample_count == WINDOW
    assert calibration.stddev == 0.0
    assert summarize("m", "estimate", []) is None


@pytest.mark.parametrize(
    ("ratio", "raw", "calibrated"),
    [(1.2, 100, 120), (1.2, 101, 122), (0.8167, 424, 347), (1.0, 17, 17), (1.5, 0, 0)],
)
def test_a_calibrated_counter_rounds_each_region_up(
    ratio: float, raw: int, calibrated: int
) -> None:
    counter = CalibratedCounter(ESTIMATE, ratio)
    assert counter.name == "estimate*calibrated"
    assert counter.tokens(raw * 4) == calibrated  # the estimate's measure is bytes
    abcd = [text_block("abcd")]
    assert counter.measure_content(abcd) == ESTIMATE.measure_content(abcd)


@asynccontextmanager
async def running(url: str, **overrides: Any) -> AsyncIterator[tuple[Container, httpx.AsyncClient]]:
    app = create_app(make_settings(url, **overrides))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            yield app.state.container, client


async def register(client: httpx.AsyncClient, model_id: str, **caps: Any) -> None:
    body = {
        "context_window_tokens": 1000,
        "max_output_tokens": 400,
        "provider": {"kind": "local"},
        **caps,
    }
    response = await client.put(f"/v1/models/{model_id}", json=body)
    assert response.status_code in (200, 201), response.text


async def record(container: Container, model_id: str, *pairs: tuple[int, int]) -> None:
    """As the turn runner does after each provider response (oldest first)."""
    async with unit_of_work(container.db) as db:
        for estimated, reported in pairs:
            await record_calibration(
                db,
                model_id=model_id,
                provider_kind="openai_chat",
                counter=ESTIMATE,
                estimated_input_tokens=estimated,
                reported_input_tokens=reported,
            )


async def test_the_model_shows_its_calibration(database_url: str) -> None:
    async with running(database_url) as (container, client):
        await register(client, "calibrated-bot")
        assert (await client.get("/v1/models/calibrated-bot")).json()["calibration"] is None
        await record(container, "calibrated-bot", (1000, 1100), (1000, 1300), (1000, None))  # type: ignore[arg-type]
        calibration = (await client.get("/v1/models/calibrated-bot")).json()["calibration"]
    assert calibration["counter"] == "estimate"
    assert calibration["ratio"] == 1.2
    assert calibration["sample_count"] == 2  # a response without usage records nothing
    assert calibration["applied"] is False  # apply_calibration is off by default
    assert [s["reported_input_tokens"] for s in calibration["samples"]] == [1300, 1100]


async def conversation_of(client: httpx.AsyncClient, model_id: str, chars: int) -> str:
    session_id = await new_session(client, model_id=model_id, agent={"system_prompt": "agent"})
    response = await client.post(
        f"/v1/sessions/{session_id}/messages",
        json={"messages": [{"role": "user", "content": text("x" * chars)}]},
    )
    assert response.status_code == 201, response.text
    return session_id


async def inspect(client: httpx.AsyncClient, session_id: str) -> dict[str, Any]:
    response = await client.get(f"/v1/sessions/{session_id}/context")
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_inspection_shows_calibration_without_applying_it_by_default(
    sqlite_url: str,
) -> None:
    async with running(sqlite_url) as (container, client):
        await register(client, "over")
        session_id = await conversation_of(client, "over", 1000)
        plain = await inspect(client, session_id)
        await record(container, "over", (1000, 1500), (1000, 1500), (1000, 1500))
        shown = await inspect(client, session_id)
    assert shown["budget"] == plain["budget"]
    assert shown["budget"]["counter"] == "estimate"
    assert shown["calibration"]["ratio"] == 1.5
    assert shown["calibration"]["applied"] is False


async def place_trigger_line(client: httpx.AsyncClient, model_id: str, low: int, high: int) -> int:
    """Re-register ``model_id`` (output 100) so its trigger line falls between two input figures.

    The tool surface (the server's own tools) may grow, so the window is derived, not fixed.
    """
    line = (low + high) // 2 + 100  # + reserved output
    window = 100 + -(-line * 100 // 85) + 1  # auto_compact_token_limit ≈ line
    await register(client, model_id, context_window_tokens=window, max_output_tokens=100)
    return line


async def test_applied_over_reporting_raises_the_budget_and_can_trigger_compaction(
    sqlite_url: str,
) -> None:
    async with running(sqlite_url, apply_calibration=True) as (container, client):
        await register(client, "over")
        session_id = await conversation_of(client, "over", 300)
        raw = (await inspect(client, session_id))["budget"]
        await record(container, "over", (1000, 1250), (1000, 1250))
        two = await inspect(client, session_id)  # fewer than 3 samples: not applied yet
        await record(container, "over", (1000, 1250))
        applied = await inspect(client, session_id)
        await place_trigger_line(
            client,
            "over",
            raw["estimated_input_tokens"],
            applied["budget"]["estimated_input_tokens"],
        )
        moved = (await inspect(client, session_id))["budget"]
    assert two["budget"] == raw
    assert two["calibration"]["applied"] is False
    budget = applied["budget"]
    assert applied["calibration"]["applied"] is True
    assert budget["counter"] == "estimate*calibrated"
    # Each message's share is of the calibrated figure, and they still add up to it.
    shares = [p["tokens"] for p in applied["provenance"]]
    assert sum(shares) == budget["conversation_tokens"]
    assert shares != [p["tokens"] for p in two["provenance"]]
    for region in ("system_context_tokens", "conversation_tokens", "tool_surface_tokens"):
        assert budget[region] == -(-raw[region] * 125 // 100)  # ceil(raw × 1.25) per region
    assert budget["estimated_input_tokens"] == (
        budget["system_context_tokens"]
        + budget["conversation_tokens"]
        + budget["tool_surface_tokens"]
    )
    # The model's limits do not move with calibration ...
    for limit in ("context_window_tokens", "effective_input_tokens", "auto_compact_token_limit"):
        assert budget[limit] == raw[limit]
    # ... and the trigger follows the number shown: with the line between the raw and the
    # calibrated figure, the calibrated budget reaches it.
    line = moved["auto_compact_token_limit"]
    assert raw["estimated_input_tokens"] + 100 < line <= moved["estimated_input_tokens"] + 100
    assert moved["estimated_input_tokens"] == budget["estimated_input_tokens"]
    assert moved["reaches_auto_compact_limit"] is True


async def test_applied_under_reporting_lowers_the_budget(sqlite_url: str) -> None:
    async with running(sqlite_url, apply_calibration=True) as (container, client):
        await register(client, "under")
        session_id = await conversation_of(client, "under", 1600)
        raw = (await inspect(client, session_id))["budget"]
        await record(container, "under", (1000, 500), (1000, 500), (1000, 500))
        budget = (await inspect(client, session_id))["budget"]
        model = (await client.get("/v1/models/under")).json()
        await place_trigger_line(
            client, "under", budget["estimated_input_tokens"], raw["estimated_input_tokens"]
        )
        moved = await inspect(client, session_id)
    assert model["calibration"]["applied"] is True
    assert budget["conversation_tokens"] == -(-raw["conversation_tokens"] // 2)
    assert budget["estimated_input_tokens"] < raw["estimated_input_tokens"]
    # Uncalibrated, this conversation would be over the line; calibrated it is not.
    line = moved["budget"]["auto_compact_token_limit"]
    assert budget["estimated_input_tokens"] + 100 < line <= raw["estimated_input_tokens"] + 100
    assert moved["budget"]["reaches_auto_compact_limit"] is False
    assert moved["auto_compact_percent"] < 100


async def test_exact_counters_are_shown_but_never_adjusted(sqlite_url: str) -> None:
    o200k = "tiktoken:o200k_base"
    async with running(sqlite_url, apply_calibration=True) as (container, client):
        await register(client, "exact", token_counter=o200k)
        session_id = await conversation_of(client, "exact", 300)
        raw = (await inspect(client, session_id))["budget"]
        async with unit_of_work(container.db) as db:
            for _ in range(3):
                await CalibrationRepository(db).add(
                    model_id="exact",
                    counter=o200k,
                    estimated_input_tokens=100,
                    reported_input_tokens=103,
                )
        shown = await inspect(client, session_id)
    assert shown["budget"] == raw
    assert shown["calibration"]["counter"] == o200k
    assert shown["calibration"]["ratio"] == 1.03
    assert shown["calibration"]["applied"] is False


async def test_a_calibrated_figure_is_recorded_as_the_estimate_it_came_from(
    sqlite_url: str,
) -> None:
    async with running(sqlite_url) as (container, _client):
        async with unit_of_work(container.db) as db:
            await record_calibration(
                db,
                model_id="m",
                provider_kind="openai_chat",
                counter=CalibratedCounter(ESTIMATE, 1.25),
                estimated_input_tokens=1250,
                reported_input_tokens=1300,
            )
        async with unit_of_work(container.db, read_only=True) as db:
            (row,) = await CalibrationRepository(db).recent("m", "estimate")
    # Recording the calibrated figure would make the ratio converge on 1 and undo itself.
    assert (row.counter, row.estimated_input_tokens) == ("estimate", 1000)


async def test_a_turn_records_the_providers_reported_input_tokens(
    sqlite_api: httpx.AsyncClient,
) -> None:
    script = [{"text": "done", "usage": {"input_tokens": 2000, "output_tokens": 5}}]
    await register(
        sqlite_api,
        "reporting",
        context_window_tokens=100_000,
        provider={"kind": "scripted", "script": script},
    )
    session_id = await new_session(sqlite_api, model_id="reporting")
    turn = await sqlite_api.post(
        f"/v1/sessions/{session_id}/turns",
        params={"wait": "true"},
        json={"client_request_id": "r1", "input": [{"type": "text", "text": "hello"}]},
    )
    assert turn.status_code in (200, 202), turn.text
    calibration = (await sqlite_api.get("/v1/models/reporting")).json()["calibration"]
    assert calibration is not None, turn.text
    (sample,) = calibration["samples"]
    assert sample["reported_input_tokens"] == 2000
    assert calibration["ratio"] == round(2000 / sample["estimated_input_tokens"], 4)


async def test_the_offline_local_model_takes_no_part_in_calibration(
    sqlite_api: httpx.AsyncClient,
) -> None:
    """Its usage is its own rough figure of the messages (no tools): learnt as a ratio it showed
    × 0.2055 in the context map after the README's first turn."""
    await register(sqlite_api, "offline", context_window_tokens=100_000)
    session_id = await new_session(sqlite_api, model_id="offline")
    turn = await sqlite_api.post(
        f"/v1/sessions/{session_id}/turns",
        params={"wait": "true"},
        json={"client_request_id": "r1", "input": [{"type": "text", "text": "hello"}]},
    )
    assert turn.status_code in (200, 202), turn.text
    assert turn.json()["status"] == "completed"
    assert turn.json()["usage"]["input_tokens"] > 0  # it did report usage
    assert (await sqlite_api.get("/v1/models/offline")).json()["calibration"] is None
    shown = await inspect(sqlite_api, session_id)
    assert shown["calibration"] is None
