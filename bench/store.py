"""Benchmark of the conversation store (run: ``.venv/bin/python bench/store.py``).

Measured in one run, on SQLite (a temporary file) and on PostgreSQL (a throw-away database on the
server named by ``--postgres-url`` / ``CTXSVC_TEST_POSTGRES_URL``; skipped when unreachable):
  (a) append throughput: single-message appends from one client and from 16 concurrent clients
      to one session, and batched appends (``--batch`` messages per request), in messages/s;
      on PostgreSQL also the connections opened per second meanwhile, by the pool's own count
      and by ``pg_stat_database.sessions`` (target: none at steady state under 16 clients);
  (b) ``GET /v1/sessions/{id}/context`` (inspection) and ``POST /v1/sessions/{id}/prepare``
      (session prepare) for sessions of 1 000 and 10 000 stored messages, next to
      ``POST /v1/prepare`` of the same conversation, system prompt, tools and model (the
      stateless pipeline), alternating; target: both ≤ 0.5× stateless at 10 000;
  (c) memory: the resident set of a server process (uvicorn, its own process) idle, after the
      first and after 20 inspections of a stored 10 000-message session (target: after 20
      ≤ 1.5× after the first);
  (d) with ``--workers``: append and prepare throughput of a real server with 1, 2 and 4
      uvicorn worker processes under 16 concurrent clients (different sessions).

(a) and (b) go through the ASGI app in-process (``httpx.ASGITransport``), so the figures are
the service's own time: routing, validation, storage and the pipeline, without a network.
``--profile`` prints the top functions of one inspection at the largest size.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import psycopg
from sqlalchemy.engine import make_url

from bench.fixtures import (
    agent_conversation,
    prepare_body,
    system_context,
    tool_definitions,
)
from bench.store_setup import (
    DEFAULT_POSTGRES_URL,
    MODEL_ID,
    POOL_CONNECTS,
    client_of,
    done,
    fill,
    libpq,
    note,
    ok,
    postgres_database,
    register_model_and_session,
    sqlite_database,
)
from tests.servers import clean_env, free_port, running, uvicorn_command

SIZES = (1_000, 10_000)
TARGET_RATIO = 0.5  # stored prepare ÷ stateless prepare at 10 000 messages
MEMORY_TARGET = 1.5  # RSS after 20 inspections ÷ after the first


# ---------------------------------------------------------------- (a) append throughput


def server_sessions(url: str | None) -> int | None:
    """``pg_stat_database.sessions`` of the database (connections ever opened to it)."""
    if url is None:
        return None
    with psycopg.connect(libpq(url), autocommit=True) as admin:
        admin.execute("SELECT pg_stat_clear_snapshot()")
        row = admin.execute(
            "SELECT sessions FROM pg_stat_database WHERE datname = %s", [make_url(url).database]
        ).fetchone()
    return None if row is None else int(row[0])


async def append_throughput(
    client: httpx.AsyncClient, batch: int, postgres: str | None
) -> dict[str, float]:
    figures: dict[str, float] = {}

    session_id = await register_model_and_session(client)
    url = f"/v1/sessions/{session_id}/messages"
    n = 300
    started = time.perf_counter()
    for i in range(n):
        done(await client.post(url, json={"messages": [note(i)]}), 201)
    figures["single, 1 client"] = n / (time.perf_counter() - started)

    clients, per_client = 16, 30

    async def writer(c: int) -> None:
        for i in range(per_client):
            done(await client.post(url, json={"messages": [note(c * 1000 + i)]}), 201)

    await asyncio.gather(*(writer(c) for c in range(clients)))  # the pool grows to 16
    await asyncio.sleep(1.1)  # pg_stat_database is flushed at most once a second
    pool_before, server_before = POOL_CONNECTS[0], server_sessions(postgres)
    started = time.perf_counter()
    await asyncio.gather(*(writer(c) for c in range(clients)))
    elapsed = time.perf_counter() - started
    figures["single, 16 clients"] = clients * per_client / elapsed
    if postgres is not None:
        await asyncio.sleep(1.1)
        server_after = server_sessions(postgres)
        figures["connections opened/s (pool)"] = (POOL_CONNECTS[0] - pool_before) / elapsed
        if server_before is not None and server_after is not None:
            # The bench's own admin connection (one per reading) is not the service's.
            figures["connections opened/s (server)"] = (server_after - server_before - 1) / elapsed

    items = agent_conversation(2_000, seed=11)
    session_id = await register_model_and_session(client)
    started = time.perf_counter()
    await fill(client, session_id, items, batch)
    figures[f"batches of {batch} (agent mix)"] = len(items) / (time.perf_counter() - started)
    return figures


# ---------------------------------------------------------------- (b) stored vs stateless


Call = Callable[[], Awaitable[httpx.Response]]


async def alternating(calls: dict[str, Call], runs: int) -> dict[str, list[float]]:
    """Each call ``runs`` times, in rounds of one each, after one warm-up round."""
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for round_ in range(runs + 1):
        for name, call in calls.items():
            started = time.perf_counter()
            done(await call())
            if round_:
                samples[name].append(time.perf_counter() - started)
    return samples


async def timed(call: Call, runs: int, status: int = 200) -> list[float]:
    done(await call(), status)  # warm-up (counters, caches, pool)
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        done(await call(), status)
        samples.append(time.perf_counter() - started)
    return samples


def fmt(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"median {statistics.median(samples) * 1000:8.1f} ms  p95 {p95 * 1000:8.1f} ms"


async def stored_vs_stateless(
    client: httpx.AsyncClient, n: int, batch: int, profile: bool
) -> dict[str, float]:
    items = agent_conversation(n)
    session_id = await register_model_and_session(client)
    await fill(client, session_id, items, batch)
    context = f"/v1/sessions/{session_id}/context"
    body = prepare_body(system_context(), items, tool_definitions())
    body.pop("model")
    body["model_id"] = MODEL_ID  # the very model the session uses
    # A session's Tool Surface adds the service's built-in tools (update_plan, ...) to the agent's.
    body["tools"] = ok(await client.get(context))["request"]["tools"]
    raw = json.dumps(body, ensure_ascii=False).encode()
    headers = {"content-type": "application/json"}

    # Same inputs must give the same request: compare the budget both report.
    a = ok(await client.get(context))["budget"]
    b = ok(await client.post("/v1/prepare", content=raw, headers=headers))["budget"]
    same = a["estimated_input_tokens"] == b["estimated_input_tokens"]

    runs = 15 if n <= 1_000 else 5
    samples = await alternating(
        {
            "inspection": lambda: client.get(context),
            # World State is sampled too: the first call stores the sandbox section (one
            # message more than the stateless body), later ones find it unchanged.
            "session prepare": lambda: client.post(f"/v1/sessions/{session_id}/prepare"),
            "stateless": lambda: client.post("/v1/prepare", content=raw, headers=headers),
        },
        runs,
    )
    stateless = statistics.median(samples["stateless"])
    ratios = {}
    for name, values in samples.items():
        ratio = statistics.median(values) / stateless
        ratios[name] = ratio
        print(f"    {n:>6} msgs  {name:<16} {fmt(values)}  ratio {ratio:4.2f}")
    print(
        f"    {n:>6} msgs  estimated input tokens: inspection {a['estimated_input_tokens']},"
        f" stateless {b['estimated_input_tokens']}{'' if same else ' — DIFFERENT'}"
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
        done(await client.get(context))
        profiler.disable()
        print(f"    profile of one inspection at {n} messages (own time, top 20):")
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(20)
    return ratios


# ---------------------------------------------------------------- (c) memory, (d) workers


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def server_env(url: str, **settings: str) -> dict[str, str]:
    return clean_env(
        CTXSVC_DATABASE_URL=url,
        CTXSVC_ALLOW_PRIVATE_MODEL_HOSTS="true",  # the fake provider listens on loopback
        CTXSVC_MIGRATE_ON_START="false",
        CTXSVC_JSON_LOGS="false",
        CTXSVC_LOG_LEVEL="WARNING",
        CTXSVC_MAX_BODY_BYTES=str(256 * 1024 * 1024),
        **settings,
    )


async def memory(url: str, n: int = 10_000, prepares: int = 20) -> float:
    """RSS of a server process idle, after the first and after ``prepares`` inspections."""
    with (
        tempfile.TemporaryDirectory(prefix="ctxsvc-bench-") as tmp,
        running([uvicorn_command(free_port())], env=server_env(url), cwd=Path(tmp)) as [server],
    ):
        assert server.process is not None
        pid = server.process.pid
        async with httpx.AsyncClient(base_url=server.url, timeout=600) as client:
            session_id = await register_model_and_session(client)
            idle = rss_bytes(pid)
            await fill(client, session_id, agent_conversation(n), 500)
            filled = rss_bytes(pid)
            context = f"/v1/sessions/{session_id}/context"
            done(await client.get(context))
            first = rss_bytes(pid)
            for _ in range(prepares - 1):
                done(await client.get(context))
            last = rss_bytes(pid)
    ratio = last / first
    mb = 1024 * 1024
    print(
        f"    RSS idle {idle / mb:6.0f} MB, after storing {n} messages {filled / mb:6.0f} MB,"
        f" after the first inspection {first / mb:6.0f} MB, after {prepares} {last / mb:6.0f} MB:"
        f" {ratio:.2f}× (target ≤ {MEMORY_TARGET}) {'OK' if ratio <= MEMORY_TARGET else 'MISS'}"
    )
    return ratio


async def workers_throughput(url: str, workers: int, clients: int = 16, each: int = 25) -> None:
    command = [*uvicorn_command(free_port()), "--workers", str(workers)]
    with (
        tempfile.TemporaryDirectory(prefix="ctxsvc-bench-") as tmp,
        running([command], env=server_env(url), cwd=Path(tmp)) as [server],
    ):
        limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
        async with httpx.AsyncClient(base_url=server.url, timeout=600, limits=limits) as client:
            sessions = [await register_model_and_session(client) for _ in range(clients)]
            for session_id in sessions:
                await fill(client, session_id, agent_conversation(200, seed=3), 200)

            async def appender(session_id: str) -> None:
                for i in range(each):
                    body = {"messages": [note(i)]}
                    done(await client.post(f"/v1/sessions/{session_id}/messages", json=body), 201)

            async def preparer(session_id: str) -> None:
                for _ in range(each):
                    done(await client.get(f"/v1/sessions/{session_id}/context"))

            rates = []
            for work in (appender, preparer):
                await asyncio.gather(*(work(s) for s in sessions))  # warm-up
                started = time.perf_counter()
                await asyncio.gather(*(work(s) for s in sessions))
                rates.append(clients * each / (time.perf_counter() - started))
    print(
        f"    {workers} worker(s), {clients} clients: appends {rates[0]:7.0f}/s,"
        f" prepares (GET /context, 200 messages) {rates[1]:7.0f}/s"
    )


# ---------------------------------------------------------------- main


async def run_backend(name: str, url: str, args: argparse.Namespace, postgres: bool) -> None:
    print(f"\n== {name}")
    async with client_of(url) as client:
        print("(a) append throughput")
        figures = await append_throughput(client, args.batch, url if postgres else None)
        for label, rate in figures.items():
            print(f"    {label:<32} {rate:8.1f} {'' if 'connections' in label else 'messages/s'}")
        print("(b) GET /context and session prepare vs POST /v1/prepare (stateless), same messages")
        ratios: dict[str, float] = {}
        for n in args.sizes:
            ratios = await stored_vs_stateless(
                client, n, args.batch, args.profile and n == max(args.sizes)
            )
        for kind in ("inspection", "session prepare"):
            verdict = "OK" if ratios[kind] <= TARGET_RATIO else "MISS"
            print(
                f"    target {kind} ≤ {TARGET_RATIO}× stateless at {max(args.sizes)}:"
                f" {ratios[kind]:.2f} {verdict}"
            )
    if not args.no_memory:
        print("(c) memory of a server process (uvicorn), 20 inspections of one stored session")
        await memory(url)
    if postgres and args.workers:
        print("(d) throughput by uvicorn worker processes")
        for workers in args.workers:
            await workers_throughput(url, workers)


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
    parser.add_argument("--workers", type=int, nargs="*", default=[1, 2, 4])
    parser.add_argument("--no-memory", action="store_true", help="skip (c)")
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()

    if args.backend in ("sqlite", "both"):
        async with sqlite_database() as url:
            await run_backend("SQLite", url, args, postgres=False)
    if args.backend in ("postgresql", "both"):
        try:
            database = postgres_database(args.postgres_url)
            url = await database.__aenter__()
        except psycopg.OperationalError as exc:
            print(f"\n== PostgreSQL skipped: {exc}")
            return
        try:
            await run_backend("PostgreSQL", url, args, postgres=True)
        finally:
            await database.__aexit__(None, None, None)


if __name__ == "__main__":
    asyncio.run(main())
