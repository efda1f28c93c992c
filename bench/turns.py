"""Turn benchmark: the service's own time per model call, and turn throughput.

Everything goes through the HTTP API of an in-process app against the loopback fake provider
(``tests.providers.fakes.FakeProviderServer``: real HTTP, OpenAI chat streaming, run in a child
process like a real provider: ``bench.provider_process``) with a fixed 50 ms latency per reply,
on SQLite (or ``CTXSVC_BENCH_DATABASE_URL``) and on a throw-away PostgreSQL database
(``--backend``; ``CTXSVC_TEST_POSTGRES_URL`` names the server).

1. Overhead per model call: one turn of 5 model calls (4 ``update_plan`` rounds, then text) on
   sessions of 100 and 1 000 stored messages (``--sizes``). Overhead = turn wall time − the
   provider's own time (measured by the fake server: from a request's first line to its reply's
   last byte), divided by the calls; so the provider adapter's work (encoding the request,
   sending it, reading the stream) counts as the service's. That part is also printed on its
   own (time inside ``ModelClient.complete`` − the provider's time). Targets: ≤ 5 % of a 50 ms
   call on SQLite, ≤ 10 % on PostgreSQL, at both sizes. Also the statements and transactions of
   one model call, counted on the engine (the database round trips), and a turn's path: the
   start (the request until its first call begins), a tool step (a call's end until the next
   call begins) and the finish (the last call's end until the answer), from the client's side;
   and the transport floor: a bare aiohttp POST of the same conversation to the same provider
   (``bench/transport.py``), the comparator for the adapter's share.
   The first turn of each session is a warm-up and is not counted (pool connections, statement
   caches); the median of 9 turns is reported.
2. Observability: the same overhead with traces off (the default) and info lines off, with the
   info lines on (JSON to a null stream, as ``ctxsvc serve`` writes them), and with traces on
   to an in-memory exporter (batch processor, as in production; FastAPI, the provider HTTP
   client and SQLAlchemy instrumented), measured in alternating rounds; plus the cost of the
   observability hooks of one model call with traces and info lines off, timed alone (the off
   path must cost nothing measurable: a few microseconds against milliseconds).
3. Throughput: 1, 10 and 50 sessions each running turns concurrently (one model call each);
   turns per second should grow with concurrency (the provider latency overlaps).

It runs on uvloop, as ``ctxsvc serve`` does.

Run: ``.venv/bin/python bench/turns.py``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

import httpx
import psycopg
import uvloop
from fastapi import FastAPI
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from app.main import create_app
from app.observability import JsonFormatter
from app.settings import Settings
from app.storage.migrate import upgrade_to_head
from bench.compaction import batch
from bench.provider_process import ProviderProcess
from bench.store_setup import DEFAULT_POSTGRES_URL, postgres_database
from bench.transport import transport_floor
from bench.turn_probes import RoundTrips, TimedClient, TurnPath, hooks_alone
from tests.providers.fakes import FakeToolCall, StreamReply, openai_stream

LATENCY = 0.05
KEY_ENV = "CTXSVC_BENCH_FAKE_KEY"


async def new_session(api: httpx.AsyncClient, model_id: str, messages: int) -> str:
    body = {
        "model_id": model_id,
        "agent": {"system_prompt": "You are a bench agent.", "tools": [], "preset": "coding"},
    }
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


def one_call(i: int) -> StreamReply:
    """The ``i``-th call of the bench's turns: 4 plan rounds, then text."""
    return plan_round(i % 5) if i % 5 < 4 else StreamReply(openai_stream(text=["done"]))


async def overhead(
    api: httpx.AsyncClient,
    server: ProviderProcess,
    sid: str,
    timed: list[tuple[float, float]],
    repeats: int,
) -> tuple[list[float], list[float], list[TurnPath]]:
    """Per-call service time and adapter time of ``repeats`` turns of session ``sid``, and
    each turn's path (``timed``: the provider calls' spans, filled by ``TimedClient``)."""
    per_call: list[float] = []
    adapter: list[float] = []
    paths: list[TurnPath] = []
    for _ in range(repeats):
        server.enqueue(
            *(plan_round(i) for i in range(4)), StreamReply(openai_stream(text=["done"]))
        )
        timed.clear()
        served = server.serving_seconds
        started = time.perf_counter()
        turn = await run_turn(api, sid)
        answered = time.perf_counter()
        provider = server.serving_seconds - served
        calls = turn["model_calls"]
        per_call.append((answered - started - provider) / calls)
        adapter.append((sum(end - begin for begin, end in timed) - provider) / calls)
        paths.append(TurnPath.of(started, answered, timed))
    return per_call, adapter, paths


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


@dataclass
class Setup:
    """One way of running the service: its app, its client and what its model calls took."""

    label: str
    app: FastAPI
    exporter: InMemorySpanExporter | None = None
    info_lines: bool = False
    calls: list[tuple[float, float]] = field(default_factory=list)
    api: httpx.AsyncClient | None = None

    @contextmanager
    def logging(self) -> Iterator[None]:
        """The service's JSON lines at info, to a null stream (only while this setup runs)."""
        if not self.info_lines:
            yield
            return
        handler = logging.StreamHandler(open(os.devnull, "w"))  # noqa: SIM115
        handler.setFormatter(JsonFormatter())
        root = logging.getLogger()
        level = root.level
        root.addHandler(handler)
        root.setLevel(logging.INFO)
        try:
            yield
        finally:
            root.removeHandler(handler)
            root.setLevel(level)
            handler.stream.close()


def setups(settings: Settings) -> list[Setup]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return [
        Setup("traces off, info lines off", create_app(settings)),
        Setup("traces off, info lines on ", create_app(settings), info_lines=True),
        Setup(
            "traces on (in-memory)      ",
            create_app(settings, tracer_provider=provider),
            exporter=exporter,
        ),
    ]


async def compare(
    runs: list[Setup], server: ProviderProcess, model_id: str, messages: int, rounds: int = 3
) -> dict[str, tuple[float, float, TurnPath]]:
    """Median service and adapter time per call of each setup, and its turns' median path, in
    alternating rounds of 3 turns after one warm-up turn each (one session per setup)."""
    sids = {}
    for run in runs:
        assert run.api is not None
        sids[run.label] = await new_session(run.api, model_id, messages)
        with run.logging():
            await overhead(run.api, server, sids[run.label], run.calls, repeats=1)
    per_call: dict[str, list[float]] = {r.label: [] for r in runs}
    adapter: dict[str, list[float]] = {r.label: [] for r in runs}
    paths: dict[str, list[TurnPath]] = {r.label: [] for r in runs}
    for _ in range(rounds):
        for run in runs:
            assert run.api is not None
            with run.logging():
                calls, inside, path = await overhead(
                    run.api, server, sids[run.label], run.calls, repeats=3
                )
            per_call[run.label] += calls
            adapter[run.label] += inside
            paths[run.label] += path
            if run.exporter is not None:
                run.exporter.clear()
    return {
        label: (
            statistics.median(per_call[label]),
            statistics.median(adapter[label]),
            TurnPath.median(paths[label]),
        )
        for label in per_call
    }


TARGETS = {"sqlite": 0.05, "postgresql": 0.10}  # service time ÷ a 50 ms model call


async def round_trips(
    run: Setup, server: ProviderProcess, sid: str, counter: RoundTrips
) -> tuple[float, float, float]:
    """Statements, transactions and PostgreSQL round trips per model call of one turn of
    ``sid`` (after the turn ended: its last write is in)."""
    assert run.api is not None
    before = counter.snapshot()
    server.enqueue(*(plan_round(i) for i in range(4)), StreamReply(openai_stream(text=["done"])))
    turn = await run_turn(run.api, sid)
    calls = turn["model_calls"]
    executed, queued, flushes, transactions = (
        a - b for a, b in zip(counter.snapshot(), before, strict=True)
    )
    trips = executed + flushes + 2 * transactions
    return (executed + queued) / calls, transactions / calls, trips / calls


async def run_database(url: str, sizes: list[int], *, quick: bool = False) -> None:
    backend = url.split(":")[0].split("+")[0]
    if backend == "sqlite":
        await upgrade_to_head(url)
    settings = Settings(
        database_url=url,
        migrate_on_start=False,
        json_logs=False,
        allow_private_model_hosts=True,  # the fake provider listens on loopback
    )
    runs = setups(settings)[:1] if quick else setups(settings)
    counter = RoundTrips(runs[0].app)
    for run in runs:
        container = run.app.state.container
        for_model = container.model_clients.for_model

        def timed(entry: Any, *, for_model: Any = for_model, run: Setup = run, **kw: Any) -> Any:
            return TimedClient(for_model(entry, **kw), run.calls)

        container.model_clients.for_model = timed
    with ProviderProcess(latency=LATENCY) as server:
        async with AsyncExitStack() as stack:
            for run in runs:
                await stack.enter_async_context(run.app.router.lifespan_context(run.app))
                transport = httpx.ASGITransport(app=run.app)
                run.api = await stack.enter_async_context(
                    httpx.AsyncClient(transport=transport, base_url="http://bench", timeout=120)
                )
            api = runs[0].api
            assert api is not None
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
            print(f"\n== database: {backend}; provider latency {LATENCY * 1000:.0f} ms")
            first: float | None = None
            target = TARGETS[backend]
            for messages in sizes:
                figures = await compare(runs, server, model_id, messages)
                base = figures[runs[0].label][0]
                first = first or base
                for label, (median, inside, _) in figures.items():
                    share = median / LATENCY * 100
                    print(
                        f"overhead per model call, {messages:>5} messages, {label}: "
                        f"median {median * 1000:.2f} ms = {share:.1f} % of a "
                        f"{LATENCY * 1000:.0f} ms call ({median / base:.2f}× traces off); "
                        f"of it in the provider adapter {inside * 1000:.1f} ms"
                    )
                floor = await transport_floor(server, messages, one_call)
                print(
                    f"transport floor at {messages} messages (a bare aiohttp POST of the same "
                    f"conversation to the same provider, bench/transport.py): "
                    f"{floor * 1000:.2f} ms per call beyond the provider's time, of the adapter's "
                    f"{figures[runs[0].label][1] * 1000:.1f} ms"
                )
                path = figures[runs[0].label][2]
                print(
                    f"a turn's path at {messages} messages (median, ms): "
                    f"start {path.start * 1000:.2f} (the request → its first model call), "
                    f"each tool step {path.step * 1000:.2f} (a call's end → the next call), "
                    f"finish {path.finish * 1000:.2f} (the last call's end → the answer)"
                )
                verdict = "OK" if base / LATENCY <= target else "MISS"
                print(
                    f"target at {messages} messages: ≤ {target * 100:.0f} % of the call:"
                    f" {base / LATENCY * 100:.1f} % {verdict}"
                )
                sid = await new_session(api, model_id, messages)
                await round_trips(runs[0], server, sid, counter)  # warm-up turn
                statements, transactions, trips = await round_trips(runs[0], server, sid, counter)
                sent = f", {trips:.1f} round trips" if backend == "postgresql" else ""
                print(
                    f"database per model call, {messages} messages: {statements:.1f} statements"
                    f" in {transactions:.1f} transactions{sent} (a turn of 5 calls: its start"
                    " and finish included)"
                )
            if quick:
                return
            hooks = await hooks_alone()
            assert first is not None
            print(
                f"observability hooks of one model call, traces and info lines off: "
                f"{hooks * 1e6:.1f} µs ({hooks / first * 100:.2f} % of the service time per "
                "call at the first size)"
            )
            for sessions in (1, 10, 50):
                rate = await throughput(api, server, model_id, sessions)
                print(f"throughput, {sessions:>2} concurrent sessions: {rate:.1f} turns/s")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000])
    parser.add_argument(
        "--backend",
        choices=["sqlite", "postgresql", "both"],
        default="both",
        help="PostgreSQL: a throw-away database on CTXSVC_TEST_POSTGRES_URL's server",
    )
    parser.add_argument(
        "--quick", action="store_true", help="traces off only; no hooks or throughput figures"
    )
    args = parser.parse_args()
    os.environ[KEY_ENV] = "sk-bench"
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as tmp:
            url = os.environ.get("CTXSVC_BENCH_DATABASE_URL") or (
                f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
            )
            await run_database(url, args.sizes, quick=args.quick)
    if args.backend in ("postgresql", "both"):
        base = os.environ.get("CTXSVC_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
        try:
            async with postgres_database(base) as url:
                await run_database(url, args.sizes, quick=args.quick)
        except psycopg.OperationalError as exc:
            print(f"\n== PostgreSQL skipped: {exc}")


if __name__ == "__main__":
    # The event loop the service runs on: ``ctxsvc serve`` (uvicorn, loop "auto") picks uvloop,
    # installed with uvicorn[standard].
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    asyncio.run(main())
