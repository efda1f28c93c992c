"""Benchmark of the conversation store (run: ``.venv/bin/python bench/store.py``).

Measured in one run, on SQLite (a temporary file) and on PostgreSQL (a throw-away database on the
server named by ``--postgres-url`` / ``CTXSVC_TEST_POSTGRES_URL``; skipped when unreachable):
  (a) append throughput: single-message appends from one client and from 16 concurrent clients
      to one session, and batched appends (``--batch`` messages per request), in messages/s;
  (b) ``GET /v1/sessions/{id}/context`` (inspection) latency for sessions of 1 000 and 10 000
      stored messages, next to ``POST /v1/prepare`` of the same conversation, system prompt, tools
      and model (the stateless pipeline); target: inspection ≤ 2× stateless at 10 000.

Requests go through the ASGI app in-process (``httpx.ASGITransport``), so the figures are the
service's own time: routing, validation, storage and the pipeline, without a network.
``--profile`` prints the top functions of one inspection at the largest size.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import psycopg
from sqlalchemy.engine import make_url

from app.main import create_app
from app.settings import Settings
from app.storage.migrate import upgrade_to_head
from bench.fixtures import (
    BENCH_CAPABILITIES,
    agent_conversation,
    item_to_json,
    prepare_body,
    system_context,
    tool_definitions,
)

SIZES = (1_000, 10_000)
DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
MODEL_ID = "bench-model"
TARGET_RATIO = 2.0


# ---------------------------------------------------------------- databases and the app


def _libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@asynccontextmanager
async def sqlite_database() -> AsyncIterator[str]:
    with tempfile.TemporaryDirectory(prefix="ctxsvc-bench-") as directory:
        url = f"sqlite+aiosqlite:///{Path(directory) / 'bench.db'}"
        await upgrade_to_head(url)
        yield url


@asynccontextmanager
async def postgres_database(base: str) -> AsyncIterator[str]:
    name = f"ctxsvc_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(_libpq(base), autocommit=True, connect_timeout=5) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = make_url(base).set(database=name).render_as_string(hide_password=False)
    try:
        await upgrade_to_head(url)
        yield url
    finally:
        with psycopg.connect(_libpq(base), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@asynccontextmanager
async def client_of(url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        database_url=url,
        migrate_on_start=False,
        json_logs=False,
        max_body_bytes=256 * 1024 * 1024,  # the stateless body of 10 000 messages is large
        _env_file=None,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", timeout=600.0
        ) as client:
            yield client


def ok(response: httpx.Response, *status: int) -> dict[str, Any]:
    if response.status_code not in (status or (200,)):
        raise SystemExit(
            f"{response.request.method} {response.request.url}: "
            f"{response.status_code} {response.text[:500]}"
        )
    result: dict[str, Any] = response.json()
    return result


async def register_model_and_session(client: httpx.AsyncClient) -> str:
    caps = BENCH_CAPABILITIES
    model = {
        "context_window_tokens": caps.context_window_tokens,
        "max_output_tokens": caps.max_output_tokens,
        "provider": {"kind": "local"},
    }
    ok(await client.put(f"/v1/models/{MODEL_ID}", json=model), 200, 201)  # 201 when new
    system = system_context()[0].content[0]
    assert system["type"] == "text"
    body = {
        "model_id": MODEL_ID,
        "agent": {"system_prompt": system["text"], "tools": tool_definitions()},
    }
    return str(ok(await client.post("/v1/sessions", json=body), 201)["id"])


# ---------------------------------------------------------------- (a) append throughput


def note(i: int) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": f"note {i}: " + "x" * 200}]}


async def append_throughput(client: httpx.AsyncClient, batch: int) -> dict[str, float]:
    figures: dict[str, float] = {}

    session_id = await register_model_and_session(client)
    url = f"/v1/sessions/{session_id}/messages"
    n = 300
    started = time.perf_counter()
    for i in range(n):
        ok(await client.post(url, json={"messages": [note(i)]}), 201)
    figures["single, 1 client"] = n / (time.perf_counter() - started)

    clients, per_client = 16, 30

    async def writer(c: int) -> None:
        for i in range(per_client):
            ok(await client.post(url, json={"messages": [note(c * 1000 + i)]}), 201)

    started = time.perf_counter()
    await asyncio.gather(*(writer(c) for c in range(clients)))
    figures["single, 16 clients"] = clients * per_client / (time.perf_counter() - started)

    items = agent_conversation(2_000, seed=11)
    session_id = await register_model_and_session(client)
    started = time.perf_counter()
    await fill(client, session_id, items, batch)
    figures[f"batches of {batch} (agent mix)"] = len(items) / (time.perf_counter() - started)
    return figures


async def fill(client: httpx.AsyncClient, session_id: str, items: list[Any], batch: int) -> None:
    url = f"/v1/sessions/{session_id}/messages"
    for start in range(0, len(items), batch):
        messages = [
            {"role": j["role"], "kind": j["kind"], "content": j["content"]}
            for j in map(item_to_json, items[start : start + batch])
        ]
        ok(await client.post(url, json={"messages": messages}), 201)


# ---------------------------------------------------------------- (b) inspection vs stateless


async def timed(
    call: Callable[[], Awaitable[httpx.Response]], runs: int, status: int = 200
) -> list[float]:
    ok(await call(), status)  # warm-up (counters, caches, pool)
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        ok(await call(), status)
        samples.append(time.perf_counter() - started)
    return samples


def fmt(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"median {statistics.median(samples) * 1000:8.1f} ms  p95 {p95 * 1000:8.1f} ms"


async def inspection_vs_stateless(
    client: httpx.AsyncClient, n: int, batch: int, profile: bool
) -> float:
    items = agent_conversation(n)
    session_id = await register_model_and_session(client)
    await fill(client, session_id, items, batch)
    body = prepare_body(system_context(), items, tool_definitions())
    body.pop("model")
    body["model_id"] = MODEL_ID  # the very model the session uses
    # A session's Tool Surface adds the service's built-in tools (update_plan, ...) to the agent's.
    body["tools"] = ok(await client.get(f"/v1/sessions/{session_id}/context"))["request"]["tools"]

    runs = 20 if n <= 1_000 else 5
    context = await timed(lambda: client.get(f"/v1/sessions/{session_id}/context"), runs)
    stateless = await timed(lambda: client.post("/v1/prepare", json=body), runs)

    # Same inputs must give the same request: compare the budget both report.
    a = ok(await client.get(f"/v1/sessions/{session_id}/context"))["budget"]
    b = ok(await client.post("/v1/prepare", json=body))["budget"]
    same = a["estimated_input_tokens"] == b["estimated_input_tokens"]
    ratio = statistics.median(context) / statistics.median(stateless)
    print(f"    {n:>6} msgs  inspection {fmt(context)}")
    print(f"    {n:>6} msgs  stateless  {fmt(stateless)}")
    print(
        f"    {n:>6} msgs  ratio {ratio:.2f}  (estimated input tokens: inspection "
        f"{a['estimated_input_tokens']}, stateless {b['estimated_input_tokens']}"
        f"{'' if same else ' — DIFFERENT'})"
    )
    # Does an append slow down as the session grows? (Runs last: it adds messages.)
    appends = await timed(
        lambda: client.post(f"/v1/sessions/{session_id}/messages", json={"messages": [note(n)]}),
        20,
        201,
    )
    print(f"    {n:>6} msgs  one append {fmt(appends)}")
    if profile:
        profiler = cProfile.Profile()
        profiler.enable()
        ok(await client.get(f"/v1/sessions/{session_id}/context"))
        profiler.disable()
        print(f"    profile of one inspection at {n} messages (own time, top 20):")
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(20)
    return ratio


# ---------------------------------------------------------------- main


async def run_backend(name: str, url: str, args: argparse.Namespace) -> None:
    print(f"\n== {name}")
    async with client_of(url) as client:
        print("(a) append throughput")
        for label, rate in (await append_throughput(client, args.batch)).items():
            print(f"    {label:<32} {rate:8.0f} messages/s")
        print("(b) GET /context (inspection) vs POST /v1/prepare (stateless), same conversation")
        ratio = 0.0
        for n in args.sizes:
            ratio = await inspection_vs_stateless(
                client, n, args.batch, args.profile and n == max(args.sizes)
            )
        verdict = "OK" if ratio <= TARGET_RATIO else "MISS"
        print(f"    target inspection ≤ {TARGET_RATIO}× stateless at {max(args.sizes)}: {verdict}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("CTXSVC_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL),
        help="a PostgreSQL server; the benchmark creates and drops its own database there",
    )
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--batch", type=int, default=200, help="messages per append request")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    if args.backend in ("sqlite", "both"):
        async with sqlite_database() as url:
            await run_backend("SQLite", url, args)
    if args.backend in ("postgresql", "both"):
        try:
            database = postgres_database(args.postgres_url)
            url = await database.__aenter__()
        except psycopg.OperationalError as exc:
            print(f"\n== PostgreSQL skipped: {exc}")
            return
        try:
            await run_backend("PostgreSQL", url, args)
        finally:
            await database.__aexit__(None, None, None)


if __name__ == "__main__":
    asyncio.run(main())
