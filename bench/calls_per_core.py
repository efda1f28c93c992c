"""Model calls per second per core at a realistic provider latency, many sessions on one worker,
and the latency the service adds to each call (p50, p99).

One uvicorn process of the service (``bench/floor_app.py``, SQLite or ``--backend
postgresql``), the loopback fake provider
in a process of its own answering every call as a stream that takes about a second (the first
byte after ``--first-byte`` seconds, then ``--events`` text events ``--event-delay`` apart, then
the closing ones). ``--sessions`` sessions of ``--messages`` messages each run one-call turns
back to back, all at once, for ``--seconds``. Printed per concurrency:

- model calls per second (wall) and per second of the worker's CPU (all its threads, read by
  the process itself before and after): the second is calls per second per core, the figure
  that says how many concurrent agents one core carries at this latency;
- the added latency of a call: a turn's wall time (``POST .../turns?wait=true``, as the caller
  sees it) less the floor, the median wall time of the same streamed reply fetched straight from
  the provider by a bare ``httpx`` client at the same concurrency, measured just before
  (p50 and p99 over every turn of the run).

Run: ``.venv/bin/python bench/calls_per_core.py [--sessions 16 64] [--seconds 20]
[--backend sqlite|postgresql]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

import httpx

from app.storage.migrate import upgrade_to_head
from bench.floor_server import floor_server, read_probe
from bench.floors_turn import KEY_ENV, register_model
from bench.provider_process import ProviderProcess
from bench.store_setup import DEFAULT_POSTGRES_URL, postgres_database
from bench.turns import new_session
from tests.providers.fakes import StreamReply, openai_stream


def reply(args: argparse.Namespace) -> StreamReply:
    return StreamReply(
        openai_stream(text=["tok "] * args.events),
        first_byte_delay=args.first_byte,
        event_delay=args.event_delay,
    )


async def floor_walls(
    provider: ProviderProcess, args: argparse.Namespace, concurrency: int, calls: int
) -> list[float]:
    """Wall seconds of the streamed reply fetched straight from the provider, ``concurrency``
    at a time: what a call costs with no service in between."""
    body = {"model": "gpt-fake", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    walls: list[float] = []
    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(timeout=60, limits=limits) as http:
        provider.enqueue(*[reply(args)] * calls)

        async def one() -> None:
            started = time.perf_counter()
            async with http.stream(
                "POST", provider.base_url + "/v1/chat/completions", json=body
            ) as answer:
                async for _ in answer.aiter_bytes():
                    pass
            walls.append(time.perf_counter() - started)

        for start in range(0, calls, concurrency):
            await asyncio.gather(*(one() for _ in range(min(concurrency, calls - start))))
    return walls


async def turn_wall(api: httpx.AsyncClient, sid: str) -> float:
    body = {"client_request_id": uuid.uuid4().hex, "input": [{"type": "text", "text": "go"}]}
    started = time.perf_counter()
    answer = await api.post(f"/v1/sessions/{sid}/turns", params={"wait": "true"}, json=body)
    wall = time.perf_counter() - started
    answer.raise_for_status()
    turn = answer.json()
    assert turn["status"] == "completed", turn
    assert turn["model_calls"] == 1, turn
    return wall


async def agent(api: httpx.AsyncClient, sid: str, deadline: float, walls: list[float]) -> None:
    """One session's turns back to back until ``deadline``, each turn's wall time kept."""
    while time.perf_counter() < deadline:
        walls.append(await turn_wall(api, sid))


async def run(url: str, args: argparse.Namespace, tmp: Path) -> None:
    with (
        ProviderProcess(latency=0.0) as provider,
        floor_server(url, tmp, **{KEY_ENV: "sk-bench"}) as server,
        httpx.Client(timeout=60) as probe,
    ):
        limits = httpx.Limits(max_connections=max(args.sessions) + 8)
        async with httpx.AsyncClient(base_url=server.url, timeout=600, limits=limits) as api:
            model_id = await register_model(api, provider)
            count = max(args.sessions)
            sids = [await new_session(api, model_id, args.messages) for _ in range(count)]
            provider.enqueue(*[reply(args)] * count)
            for sid in sids:  # each session read once: the run measures the steady state
                await turn_wall(api, sid)
            for concurrency in args.sessions:
                floor = statistics.median(
                    await floor_walls(provider, args, concurrency, 2 * concurrency)
                )
                walls: list[float] = []
                # The replies are queued up front, more than the run can take: queueing one per
                # call is a round trip to the provider's process, which the provider's GIL
                # (busy streaming) delays, and the bench's loop would wait on it.
                provider.enqueue(*[reply(args)] * int(concurrency * (args.seconds + 10)))
                deadline = time.perf_counter() + args.seconds
                before, started = read_probe(probe, server), time.perf_counter()
                await asyncio.gather(*(agent(api, s, deadline, walls) for s in sids[:concurrency]))
                after, elapsed = read_probe(probe, server), time.perf_counter() - started
                cpu = after.cpu - before.cpu
                added = sorted(w - floor for w in walls)
                p99 = added[min(len(added) - 1, round(0.99 * (len(added) - 1)))]
                print(
                    f"{concurrency:>4} sessions of {args.messages} msgs, {len(walls)} calls in "
                    f"{elapsed:.1f} s: {len(walls) / elapsed:7.1f} calls/s wall, "
                    f"{len(walls) / cpu:7.1f} calls per CPU-second of the worker "
                    f"({cpu / len(walls) * 1e3:.2f} ms CPU per call; worker busy "
                    f"{cpu / elapsed * 100:.0f} % of one core); provider floor {floor * 1e3:.0f} "
                    f"ms; added latency p50 {statistics.median(added) * 1e3:.1f} ms, "
                    f"p99 {p99 * 1e3:.1f} ms",
                    flush=True,
                )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--messages", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--first-byte", type=float, default=0.2)
    parser.add_argument("--events", type=int, default=8)
    parser.add_argument("--event-delay", type=float, default=0.08)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    args = parser.parse_args()
    os.environ.setdefault(KEY_ENV, "sk-bench")
    with tempfile.TemporaryDirectory(prefix="ctxsvc-bench-") as tmp:
        if args.backend == "sqlite":
            url = f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
            await upgrade_to_head(url)
            await run(url, args, Path(tmp))
        else:
            base = os.environ.get("CTXSVC_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
            async with postgres_database(base) as url:
                await run(url, args, Path(tmp))


if __name__ == "__main__":
    asyncio.run(main())
