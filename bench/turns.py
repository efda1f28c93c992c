"""Turn benchmark: the service's own time per model call, and turn throughput.

Everything goes through the HTTP API of an in-process app against the loopback fake provider
(``tests.providers.fakes.FakeProviderServer``: real HTTP, OpenAI chat streaming, run in a child
process like a real provider: ``bench.provider_process``) with a fixed 50 ms latency per reply,
on SQLite (or ``CTXSVC_BENCH_DATABASE_URL``, e.g. a PostgreSQL database already migrated).

1. Overhead per model call: one turn of 5 model calls (4 ``update_plan`` rounds, then text) on
   sessions of 100 and 5 000 stored messages. Overhead = turn wall time − the provider's own
   time (measured by the fake server: from a request's first line to its reply's last byte),
   divided by the calls; so the provider adapter's work (encoding the request, sending it,
   reading the stream) counts as the service's. That part is also printed on its own (time
   inside ``ModelClient.complete`` − the provider's time). Target: ≤ 10 % of a 50 ms call
   (5 ms) at 100 messages. The first turn of each session is a warm-up and is not counted (pool
   connections, statement caches); the median of 9 turns is reported.
2. Throughput: 1, 10 and 50 sessions each running turns concurrently (one model call each);
   turns per second should grow with concurrency (the provider latency overlaps).

It runs on uvloop, as ``ctxsvc serve`` does.

Run: ``.venv/bin/python -m bench.turns``
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import uvloop

from app.main import create_app
from app.providers.base import ModelClient, ModelResponse, StreamSink
from app.settings import Settings
from app.storage.migrate import upgrade_to_head
from bench.compaction import batch
from bench.provider_process import ProviderProcess
from tests.providers.fakes import FakeToolCall, StreamReply, openai_stream

LATENCY = 0.05
KEY_ENV = "CTXSVC_BENCH_FAKE_KEY"


class TimedClient:
    """Adds the time spent inside the provider call to a shared total."""

    def __init__(self, inner: ModelClient, totals: list[float]) -> None:
        self._inner = inner
        self._totals = totals

    async def complete(
        self, request: dict[str, Any], *, sink: StreamSink | None = None
    ) -> ModelResponse:
        started = time.perf_counter()
        try:
            return await self._inner.complete(request, sink=sink)
        finally:
            self._totals.append(time.perf_counter() - started)


async def new_session(api: httpx.AsyncClient, model_id: str, messages: int) -> str:
    body = {"model_id": model_id, "agent": {"system_prompt": "You are a bench agent.", "tools": []}}
    response = await api.post("/v1/sessions", json=body)
    response.raise_for_status()
    sid = str(response.json()["id"])
    rows = batch(0, messages)
    for start in range(0, len(rows), 500):
        chunk = [{"role": r, "kind": k, "content": c} for r, k, c in rows[start : start + 500]]
        (
            await api.post(f"/v1/sessions/{sid}/messages", json={"messages": chunk})
        ).raise_for_status()
    return sid


async def run_turn(api: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    body = {"client_request_id": uuid.uuid4().hex, "input": [{"type": "text", "text": "go"}]}
    response = await api.post(f"/v1/sessions/{sid}/turns", params={"wait": "true"}, json=body)
    response.raise_for_status()
    turn = dict(response.json())
    assert turn["status"] == "completed", turn
    return turn


def plan_round(i: int) -> StreamReply:
    arguments = json.dumps({"plan": [{"step": f"step {i}", "status": "in_progress"}]})
    call = FakeToolCall(f"plan-{uuid.uuid4().hex[:8]}", "update_plan", [arguments])
    return StreamReply(openai_stream(tool_calls=[call], finish_reason="tool_calls"))


async def overhead(
    api: httpx.AsyncClient,
    server: ProviderProcess,
    model_id: str,
    totals: list[float],
    messages: int,
    repeats: int = 9,
    warmup: int = 1,
) -> dict[str, float]:
    sid = await new_session(api, model_id, messages)
    per_call: list[float] = []
    adapter: list[float] = []
    for repeat in range(warmup + repeats):
        server.enqueue(
            *(plan_round(i) for i in range(4)), StreamReply(openai_stream(text=["done"]))
        )
        totals.clear()
        served = server.serving_seconds
        started = time.perf_counter()
        turn = await run_turn(api, sid)
        wall = time.perf_counter() - started
        provider = server.serving_seconds - served
        calls = turn["model_calls"]
        if repeat >= warmup:
            per_call.append((wall - provider) / calls)
            adapter.append((sum(totals) - provider) / calls)
    return {
        "median_ms": statistics.median(per_call) * 1000,
        "min_ms": min(per_call) * 1000,
        "adapter_ms": statistics.median(adapter) * 1000,
    }


async def throughput(
    api: httpx.AsyncClient,
    server: ProviderProcess,
    model_id: str,
    sessions: int,
    turns_each: int = 4,
) -> float:
    sids = [await new_session(api, model_id, 20) for _ in range(sessions)]
    server.enqueue(*(StreamReply(openai_stream(text=["ok"])) for _ in range(sessions * turns_each)))

    async def worker(sid: str) -> None:
        for _ in range(turns_each):
            await run_turn(api, sid)

    started = time.perf_counter()
    await asyncio.gather(*(worker(s) for s in sids))
    return sessions * turns_each / (time.perf_counter() - started)


async def main() -> None:
    os.environ[KEY_ENV] = "sk-bench"
    with tempfile.TemporaryDirectory() as tmp:
        url = os.environ.get("CTXSVC_BENCH_DATABASE_URL") or (
            f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        )
        if url.startswith("sqlite"):
            await upgrade_to_head(url)
        settings = Settings(database_url=url, migrate_on_start=False, json_logs=False)
        app = create_app(settings)
        container = app.state.container
        totals: list[float] = []
        for_model = container.model_clients.for_model
        container.model_clients.for_model = lambda entry: TimedClient(for_model(entry), totals)
        with ProviderProcess(latency=LATENCY) as server:
            async with app.router.lifespan_context(app):
                transport = httpx.ASGITransport(app=app)
                async with httpx.AsyncClient(
                    transport=transport, base_url="http://bench", timeout=120
                ) as api:
                    model_id = "bench-fake"
                    model = {
                        "context_window_tokens": 4_000_000,
                        "max_output_tokens": 16_384,
                        "provider": {
                            "kind": "openai_chat",
                            "base_url": server.base_url + "/v1",
                            "model_name": "gpt-fake",
                            "api_key_env": KEY_ENV,
                        },
                    }
                    (await api.put(f"/v1/models/{model_id}", json=model)).raise_for_status()
                    print(
                        f"database: {url.split(':')[0]}; provider latency {LATENCY * 1000:.0f} ms"
                    )
                    for messages in (100, 5000):
                        figures = await overhead(api, server, model_id, totals, messages)
                        share = figures["median_ms"] / (LATENCY * 1000) * 100
                        print(
                            f"overhead per model call, {messages:>5} messages: "
                            f"median {figures['median_ms']:.2f} ms (min {figures['min_ms']:.2f} ms)"
                            f" = {share:.0f} % of a {LATENCY * 1000:.0f} ms call; of it in the "
                            f"provider adapter {figures['adapter_ms']:.1f} ms"
                        )
                    for sessions in (1, 10, 50):
                        rate = await throughput(api, server, model_id, sessions)
                        print(f"throughput, {sessions:>2} concurrent sessions: {rate:.1f} turns/s")


if __name__ == "__main__":
    # The event loop the service runs on: ``ctxsvc serve`` (uvicorn, loop "auto") picks uvloop,
    # installed with uvicorn[standard].
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    asyncio.run(main())
