"""Turn step ÷ its floor, in CPU time: target ≤ 2.0.

The service runs in its own uvicorn process (``bench/floor_app.py``) against the loopback fake
provider (``bench/provider_process.py``, its own process); its CPU time per model call is the
process's CPU time (all threads) over a turn of 5 calls (4 ``update_plan`` rounds, then text: the
turns of ``bench/turns.py``), read from the process before and after, divided by the calls. The
floor, measured in this process in the same rounds (alternating with the service's turn):
- the transport floor: a bare ``aiohttp`` POST of the same conversation's body to the same
  provider, its stream read to the end (``bench/transport.py``'s body), this process's CPU time;
- one step-shaped transaction through the raw driver on the same engine (``bench/raw_step.py``:
  ``sqlite3`` WAL, ``psycopg`` pipelined), this process's CPU time.
Also printed: the statements per model call as the server counts them (BEGIN, COMMIT and each
row of a batch or of a deferred write one each: ``bench/floor_app.py``) and its transactions.

Run: ``.venv/bin/python bench/floors_turn.py [--sizes 100 1000 10000] [--backend both]``
(``--sizes 100000`` too, when there is time: filling the session takes minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

import aiohttp
import httpx
import psycopg
import uvloop

from app.storage.migrate import upgrade_to_head
from bench.floor_server import floor_server, read_probe
from bench.provider_process import ProviderProcess
from bench.raw_step import RawStep
from bench.store_setup import DEFAULT_POSTGRES_URL, libpq, postgres_database
from bench.transport import conversation_body
from bench.turns import new_session, one_call, plan_round, run_turn
from tests.providers.fakes import StreamReply, openai_stream
from tests.servers import ServerProcess

TARGET = 2.0
CALLS = 5  # a turn's model calls
KEY_ENV = "BENCH_FLOOR_FAKE_KEY"


async def register_model(api: httpx.AsyncClient, provider: ProviderProcess) -> str:
    model = {
        # Room for 100 000 of the bench's messages (40 MB) with no compaction.
        "context_window_tokens": 100_000_000,
        "max_output_tokens": 16_384,
        "provider": {
            "kind": "openai_chat",
            "base_url": provider.base_url + "/v1",
            "model_name": "gpt-fake",
            "api_key_env": KEY_ENV,
        },
    }
    (await api.put("/v1/models/bench-fake", json=model)).raise_for_status()
    return "bench-fake"


async def service_turn(
    api: httpx.AsyncClient,
    probe: httpx.Client,
    server: ServerProcess,
    provider: ProviderProcess,
    sid: str,
) -> tuple[float, float, float]:
    """CPU seconds, statements and transactions per model call of one turn."""
    provider.enqueue(*(plan_round(i) for i in range(4)), StreamReply(openai_stream(text=["done"])))
    before = read_probe(probe, server)
    turn = await run_turn(api, sid)
    after = read_probe(probe, server)
    calls = int(turn["model_calls"])
    assert calls == CALLS, turn
    return (
        (after.cpu - before.cpu) / calls,
        (after.statements - before.statements) / calls,
        (after.transactions - before.transactions) / calls,
    )


async def floor_calls(
    http: aiohttp.ClientSession, provider: ProviderProcess, body: bytes, step: RawStep
) -> tuple[float, float]:
    """This process's CPU seconds per call of ``CALLS`` bare POSTs and of as many raw steps."""
    provider.enqueue(*(one_call(i) for i in range(CALLS)))
    url = provider.base_url + "/v1/chat/completions"
    headers = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
    started = time.process_time()
    for _ in range(CALLS):
        async with http.post(url, data=body, headers=headers) as response:
            async for _chunk in response.content.iter_any():
                pass
    posted = time.process_time()
    for _ in range(CALLS):
        step.step()
    stepped = time.process_time()
    return (posted - started) / CALLS, (stepped - posted) / CALLS


async def run_backend(
    backend: str, url: str, raw_target: str, sizes: list[int], rounds: int, tmp: Path
) -> None:
    step = RawStep(backend, raw_target)
    with (
        ProviderProcess(latency=0.02) as provider,
        floor_server(url, tmp, **{KEY_ENV: "sk-bench"}) as server,
        httpx.Client(timeout=60) as probe,
    ):
        async with (
            httpx.AsyncClient(base_url=server.url, timeout=600) as api,
            aiohttp.ClientSession() as http,
        ):
            model_id = await register_model(api, provider)
            print(f"\n== {backend}: service CPU per model call ÷ (transport floor + raw step)")
            for n in sizes:
                sid = await new_session(api, model_id, n)
                body = conversation_body(n)
                await service_turn(api, probe, server, provider, sid)  # warm-up
                await floor_calls(http, provider, body, step)
                service: list[float] = []
                statements: list[float] = []
                transactions: list[float] = []
                transport: list[float] = []
                raw: list[float] = []
                for _ in range(rounds):
                    cpu, st, tx = await service_turn(api, probe, server, provider, sid)
                    service.append(cpu)
                    statements.append(st)
                    transactions.append(tx)
                    t, r = await floor_calls(http, provider, body, step)
                    transport.append(t)
                    raw.append(r)
                s, t, r = (statistics.median(x) for x in (service, transport, raw))
                verdict = "met" if s / (t + r) <= TARGET else "MISSED"
                print(
                    f"{n:>7} msgs: service {s * 1e3:7.2f} ms CPU/call; floor {(t + r) * 1e3:6.2f}"
                    f" ms (transport {t * 1e3:.2f} + raw step {r * 1e3:.3f}); ratio "
                    f"{s / (t + r):6.2f} (target ≤ {TARGET}: {verdict}); "
                    f"{statistics.median(statements):.1f} statements in "
                    f"{statistics.median(transactions):.2f} transactions per call"
                )
    step.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000, 10_000])
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    os.environ.setdefault(KEY_ENV, "sk-bench")
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory(prefix="ctxsvc-bench-") as tmp:
            url = f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
            await upgrade_to_head(url)
            raw = str(Path(tmp) / "raw.db")
            await run_backend("sqlite", url, raw, args.sizes, args.rounds, Path(tmp))
    if args.backend in ("postgresql", "both"):
        base = os.environ.get("CTXSVC_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
        try:
            async with postgres_database(base) as url:
                with tempfile.TemporaryDirectory(prefix="ctxsvc-bench-") as tmp:
                    await run_backend(
                        "postgresql", url, libpq(url), args.sizes, args.rounds, Path(tmp)
                    )
        except psycopg.OperationalError as exc:
            print(f"\n== PostgreSQL skipped: {exc}")


if __name__ == "__main__":
    # The service's loop (uvicorn picks uvloop): the bare client's floor runs on the same.
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    asyncio.run(main())
