"""What the floor benchmarks read is what they say: the raw echo sends back the bytes it got, the
server's statement count takes in BEGIN, COMMIT and each row of a batch, the raw step stores
what a step stores, and the calls-per-core floor is the whole scripted stream
(``bench/floor_app.py``, ``bench/raw_step.py``, ``bench/calls_per_core.py``)."""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.main import create_app
from bench.calls_per_core import floor_walls
from bench.floor_app import FloorApp
from bench.provider_process import ProviderProcess
from bench.raw_step import RawStep
from tests.conftest import make_settings


async def _figures(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get("/bench/cpu")
    assert response.status_code == 200
    return dict(response.json())


@pytest.mark.anyio
async def test_raw_echo_and_statement_count(sqlite_url: str) -> None:
    inner = create_app(make_settings(sqlite_url))
    floor = FloorApp(inner)
    async with inner.router.lifespan_context(inner):
        transport = httpx.ASGITransport(app=floor)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            body = b'{"any": "bytes", "\\u00e9": [1, 2.50]}'
            echoed = await client.post("/bench/raw-echo", content=body)
            assert echoed.content == body

            model = {
                "context_window_tokens": 100_000,
                "max_output_tokens": 1_000,
                "provider": {
                    "kind": "openai_chat",
                    "base_url": "http://127.0.0.1:9/v1",
                    "model_name": "m",
                    "api_key_env": "BENCH_FLOOR_UNUSED_KEY",
                },
            }
            assert (await client.put("/v1/models/m", json=model)).status_code in (200, 201)
            session = {"model_id": "m", "agent": {"system_prompt": "s", "tools": []}}
            created = await client.post("/v1/sessions", json=session)
            assert created.status_code == 201, created.text
            sid = created.json()["id"]
            counts = []
            for rows in (1, 1, 4):  # the first append also reads what later ones keep
                content = [{"type": "text", "text": "m"}]
                messages = [{"role": "user", "content": content} for _ in range(rows)]
                before = await _figures(client)
                appended = await client.post(
                    f"/v1/sessions/{sid}/messages", json={"messages": messages}
                )
                assert appended.status_code in (200, 201), appended.text
                after = await _figures(client)
                counts.append(after["statements"] - before["statements"])
                assert after["transactions"] > before["transactions"]
                assert after["cpu"] > before["cpu"]
                assert after["rss"] > 0
            # Three more rows in the batch: at least three more statements counted.
            assert counts[2] - counts[1] == 3, counts
            # BEGIN and COMMIT are counted besides the row.
            assert counts[1] >= 3, counts


def test_raw_step_stores_a_step(tmp_path: Path) -> None:
    path = tmp_path / "raw.db"
    step = RawStep("sqlite", str(path))
    for _ in range(3):
        step.step()
    step.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM floor_messages").fetchone() == (6,)
        assert db.execute("SELECT count(*) FROM floor_events").fetchone() == (3,)
        assert db.execute("SELECT last_seq FROM floor_sessions").fetchone() == (7,)
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


@pytest.mark.anyio
async def test_the_calls_floor_waits_for_the_whole_scripted_stream() -> None:
    # ``bench/calls_per_core.py``'s floor: each call is the scripted stream read to its end, so
    # it lasts at least the first byte's hold plus the events' pacing (a lower bound only).
    args = argparse.Namespace(first_byte=0.05, events=3, event_delay=0.01)
    with ProviderProcess(latency=0.0) as provider:
        walls = await floor_walls(provider, args, concurrency=2, calls=3)
    assert len(walls) == 3
    assert min(walls) >= 0.05 + 3 * 0.01
