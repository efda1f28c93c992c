"""Where a turn's CPU goes in the server, per stored-conversation size: cProfile (counting the
main thread's CPU time) inside the ``bench/floor_app.py`` process (``BENCH_PROFILE``) over turns
of 5 model calls (the turns of ``bench/floors_turn.py``), on SQLite; prints the top functions by
cumulative and own time.

Run: ``.venv/bin/python bench/profile_turn.py [--sizes 1000 10000] [--turns 2]``
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import pstats
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

import httpx
import uvloop

from app.storage.migrate import upgrade_to_head
from bench.floor_server import floor_server
from bench.floors_turn import CALLS, KEY_ENV, register_model
from bench.provider_process import ProviderProcess
from bench.turns import new_session, plan_round, run_turn
from tests.providers.fakes import StreamReply, openai_stream


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctxsvc-prof-") as tmp:
        url = f"sqlite+aiosqlite:///{Path(tmp) / 'bench.db'}"
        await upgrade_to_head(url)
        out = str(Path(tmp) / "turn.prof")
        settings = {KEY_ENV: "sk-bench", "BENCH_PROFILE": out}
        with (
            ProviderProcess(latency=0.02) as provider,
            floor_server(url, Path(tmp), **settings) as sv,
        ):
            async with httpx.AsyncClient(base_url=sv.url, timeout=600) as api:
                model_id = await register_model(api, provider)
                for n in args.sizes:
                    sid = await new_session(api, model_id, n)
                    for warm in (True, False):
                        if not warm:
                            await api.post("/bench/profile")
                        for _ in range(1 if warm else args.turns):
                            replies = [plan_round(i) for i in range(CALLS - 1)]
                            provider.enqueue(*replies, StreamReply(openai_stream(text=["done"])))
                            await run_turn(api, sid)
                    await api.post("/bench/profile")
                    calls = args.turns * CALLS
                    for key in ("cumulative", "tottime"):
                        text = io.StringIO()
                        stats = pstats.Stats(out, stream=text)
                        stats.sort_stats(key).print_stats(args.top)
                        print(f"\n==== {n} messages, {calls} calls, by {key}\n{text.getvalue()}")


if __name__ == "__main__":
    os.environ.setdefault(KEY_ENV, "sk-bench")
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    asyncio.run(main())
