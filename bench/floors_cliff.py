"""No cliff: many long sessions on one worker ÷ one session alone (target ≤ 1.5×), and the
worker's resident memory.

Two uvicorn processes of the service (``bench/floor_app.py``) on one database, the loopback fake
provider in a third: worker A serves 12 sessions of 10 000 messages in round robin, worker B one
such session alone, the same number of turns (one model call each: a text answer), A's and B's
rounds alternating. Printed: the median CPU time of the worker per model call (read from the
process before and after each turn, all its threads), the ratio A ÷ B, and each worker's
resident memory (``/proc/<pid>/statm`` as the process reads it) when it started serving and at
the end.

Run: ``.venv/bin/python bench/floors_cliff.py [--sessions 12] [--messages 10000]
[--backend sqlite|postgresql]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

import httpx
import uvloop

from app.storage.migrate import upgrade_to_head
from bench.floor_server import Probe, floor_server, read_probe
from bench.floors_turn import KEY_ENV, register_model
from bench.provider_process import ProviderProcess
from bench.store_setup import DEFAULT_POSTGRES_URL, postgres_database
from bench.turns import new_session, run_turn
from tests.providers.fakes import StreamReply, openai_stream
from tests.servers import ServerProcess

TARGET = 1.5


async def one_call_turn(
    api: httpx.AsyncClient,
    probe: httpx.Client,
    server: ServerProcess,
    provider: ProviderProcess,
    sid: str,
) -> tuple[float, Probe]:
    provider.enqueue(StreamReply(openai_stream(text=["ok"])))
    before = read_probe(probe, server)
    turn = await run_turn(api, sid)
    after = read_probe(probe, server)
    assert turn["model_calls"] == 1, turn
    return after.cpu - before.cpu, after


async def run(url: str, sessions: int, messages: int, rounds: int, tmp: Path) -> None:
    with ExitStack() as stack:
        provider = stack.enter_context(ProviderProcess(latency=0.02))
        (tmp / "many").mkdir()
        (tmp / "alone").mkdir()
        many = stack.enter_context(floor_server(url, tmp / "many", **{KEY_ENV: "sk-bench"}))
        alone = stack.enter_context(floor_server(url, tmp / "alone", **{KEY_ENV: "sk-bench"}))
        probe = stack.enter_context(httpx.Client(timeout=60))
        async with AsyncExitStack() as astack:
            api_many = await astack.enter_async_context(
                httpx.AsyncClient(base_url=many.url, timeout=600)
            )
            api_alone = await astack.enter_async_context(
                httpx.AsyncClient(base_url=alone.url, timeout=600)
            )
            model_id = await register_model(api_many, provider)
            print(f"filling {sessions + 1} sessions of {messages} messages…", flush=True)
            sids = [await new_session(api_many, model_id, messages) for _ in range(sessions + 1)]
            lone, crowd = sids[-1], sids[:-1]
            start_many, start_alone = read_probe(probe, many), read_probe(probe, alone)
            cpu_many: list[float] = []
            cpu_alone: list[float] = []
            end_many, end_alone = start_many, start_alone
            for i in range(rounds + 1):  # the first round warms up (each session read once)
                for sid in crowd:
                    cpu, end_many = await one_call_turn(api_many, probe, many, provider, sid)
                    if i:
                        cpu_many.append(cpu)
                for _ in crowd:
                    cpu, end_alone = await one_call_turn(api_alone, probe, alone, provider, lone)
                    if i:
                        cpu_alone.append(cpu)
            m, a = statistics.median(cpu_many), statistics.median(cpu_alone)
            p90_many = statistics.quantiles(cpu_many, n=10)[-1]
            p90_alone = statistics.quantiles(cpu_alone, n=10)[-1]
            verdict = "met" if m / a <= TARGET else "MISSED"
            print(
                f"{sessions} sessions of {messages} msgs in round robin: {m * 1e3:.2f} ms CPU per "
                f"call (p90 {p90_many * 1e3:.2f}); one session "
                f"alone: {a * 1e3:.2f} ms (p90 {p90_alone * 1e3:.2f})"
                f"; ratio {m / a:.2f}× (target ≤ {TARGET}×: {verdict})"
            )
            print(
                f"RSS, {sessions} sessions: {start_many.rss / 1e6:.0f} MB after filling → "
                f"{end_many.rss / 1e6:.0f} MB after {rounds + 1} rounds; one session: "
                f"{start_alone.rss / 1e6:.0f} → {end_alone.rss / 1e6:.0f} MB"
            )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=12)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    args = parser.parse_args()
    os.environ.setdefault(KEY_ENV, "sk-bench")
    print(f"== {args.backend}")
    with tempfile.TemporaryDirectory(prefix="ctxsvc-bench-") as tmp:
        if args.backend == "sqlite":
            url = f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
            await upgrade_to_head(url)
            await run(url, args.sessions, args.messages, args.rounds, Path(tmp))
        else:
            base = os.environ.get("CTXSVC_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
            async with postgres_database(base) as url:
                await run(url, args.sessions, args.messages, args.rounds, Path(tmp))


if __name__ == "__main__":
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    asyncio.run(main())
