"""What the stack alone costs against the turn step's floor (``bench/floors_turn.py``), in CPU.

``bench/minimal_turn_app.py`` in its own uvicorn process answers the caller's turn request with 5
model calls, each a bare ``aiohttp`` POST of the conversation to the same fake provider plus one
step-shaped transaction (``bench/raw_step.py``'s statements) on the service's own engine, four
ways: none (FastAPI + transport alone); through SQLAlchemy's ``AsyncSession`` (the session row
read through the ORM under its lock, the writes executed one by one); the same with the writes
deferred to the raw driver at the commit (``app.storage.deferred``, as a turn step sends them);
SQLAlchemy Core on an ``AsyncConnection`` (no ORM session); and the raw driver (``sqlite3``,
``psycopg`` pipelined) in the server. Its CPU per model call (process
CPU, all threads, over a turn) is set against the same floor as ``bench/floors_turn.py``'s: a
bare ``aiohttp`` POST of the same body from this process plus one raw-driver step. A ratio above
2.0 here says the turn-step target cannot be met on that stack whatever the service's own code
does.

Run: ``.venv/bin/python bench/floors_minimal_turn.py [--sizes 100 1000] [--backend both]``
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

import aiohttp
import httpx
import uvloop

from bench.floors_turn import CALLS, floor_calls
from bench.provider_process import ProviderProcess
from bench.raw_step import RawStep
from bench.store_setup import DEFAULT_POSTGRES_URL, libpq, postgres_database
from bench.transport import conversation_body
from bench.turns import one_call
from tests.servers import PYTHON, REPO_ROOT, clean_env, free_port, running

_VARIANTS = ("none", "session", "deferred", "core", "raw")


async def minimal_turn(api: httpx.AsyncClient, provider: ProviderProcess, n: int, db: str) -> float:
    """The minimal app's CPU seconds per model call over one turn."""
    provider.enqueue(*(one_call(i) for i in range(CALLS)))
    before = float((await api.get("/bench/cpu")).json()["cpu"])
    body = {"client_request_id": uuid.uuid4().hex, "input": [{"type": "text", "text": "go"}]}
    answer = await api.post("/v1/sessions/s1/turns", params={"messages": n, "db": db}, json=body)
    answer.raise_for_status()
    after = float((await api.get("/bench/cpu")).json()["cpu"])
    return (after - before) / CALLS


async def run_backend(
    backend: str, url: str, raw: str, sizes: list[int], rounds: int, tmp: Path
) -> None:
    step = RawStep(backend, raw)
    port = free_port()
    command = [str(PYTHON), "-m", "uvicorn", "bench.minimal_turn_app:app", "--log-level", "warning"]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    with ProviderProcess(latency=0.02) as provider:
        env = clean_env(
            MINIMAL_DATABASE_URL=url,
            MINIMAL_PROVIDER_URL=provider.base_url,
            PYTHONPATH=str(REPO_ROOT),
        )
        with running([command], env=env, cwd=tmp, ready_path="/bench/cpu"):
            async with (
                httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=600) as api,
                aiohttp.ClientSession() as http,
            ):
                print(f"\n== {backend}: minimal FastAPI route, CPU per model call ÷ floor")
                for n in sizes:
                    body = conversation_body(n)
                    for db in _VARIANTS:
                        await minimal_turn(api, provider, n, db)  # warm-up
                    await floor_calls(http, provider, body, step)
                    figures: dict[str, list[float]] = {k: [] for k in (*_VARIANTS, "t", "r")}
                    for _ in range(rounds):
                        for db in _VARIANTS:
                            figures[db].append(await minimal_turn(api, provider, n, db))
                        t, r = await floor_calls(http, provider, body, step)
                        figures["t"].append(t)
                        figures["r"].append(r)
                    none, session, deferred, core, raw_in, t, r = (
                        statistics.median(v) for v in figures.values()
                    )
                    floor = t + r
                    print(
                        f"{n:>7} msgs: floor {floor * 1e3:6.2f} ms (transport {t * 1e3:.2f} + "
                        f"raw step {r * 1e3:.3f}); FastAPI + transport {none * 1e3:6.2f} ms = "
                        f"{none / floor:5.2f}; + AsyncSession step {session * 1e3:6.2f} ms = "
                        f"{session / floor:5.2f} (the step alone {(session - none) * 1e3:.2f} ms"
                        f" ÷ raw {r * 1e3:.3f} = {(session - none) / r:5.1f}×); its writes "
                        f"deferred {deferred * 1e3:6.2f} ms = {deferred / floor:5.2f} (the step "
                        f"alone {(deferred - none) * 1e3:.2f} ms = {(deferred - none) / r:5.1f}×); "
                        f"Core on an AsyncConnection {core * 1e3:6.2f} ms = {core / floor:5.2f} "
                        f"(the step alone {(core - none) * 1e3:.2f} ms = "
                        f"{(core - none) / r:5.1f}×); "
                        f"the raw driver in the server {raw_in * 1e3:6.2f} ms = "
                        f"{raw_in / floor:5.2f} (the step alone {(raw_in - none) * 1e3:.2f} ms = "
                        f"{(raw_in - none) / r:5.1f}×)"
                    )
    step.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000])
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    started = time.time()
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory(prefix="ctxsvc-bench-") as tmp:
            url = f"sqlite+aiosqlite:///{Path(tmp) / 'minimal.db'}"
            raw = str(Path(tmp) / "raw.db")
            await run_backend("sqlite", url, raw, args.sizes, args.rounds, Path(tmp))
    if args.backend in ("postgresql", "both"):
        base = os.environ.get("CTXSVC_TEST_POSTGRES_URL", DEFAULT_POSTGRES_URL)
        async with postgres_database(base) as url:
            with tempfile.TemporaryDirectory(prefix="ctxsvc-bench-") as tmp:
                await run_backend("postgresql", url, libpq(url), args.sizes, args.rounds, Path(tmp))
    print(f"\n({time.time() - started:.0f} s)")


if __name__ == "__main__":
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    asyncio.run(main())
