"""What blocks ``POST /v1/prepare`` ÷ raw echo ≤ 2.0× (``bench/floors_http.py``): the server CPU
per request of minimal FastAPI routes (``bench/minimal_http_app.py``) taking the same body, beside
the raw-bytes echo of the same uvicorn process, and the ratios.

Run: ``.venv/bin/python bench/floors_minimal_http.py [sizes...]`` (default 100 1000).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

import httpx

from app.core.pipeline.prepared_call import PruningWatermark
from bench.fixtures import agent_conversation, prepare_body, system_context, tool_definitions
from bench.floor_server import read_probe
from bench.floors_http import HEADERS, batch_size
from bench.lean_client import LeanClient
from tests.servers import PYTHON, REPO_ROOT, clean_env, free_port, running

TARGETS = ("raw echo", "route", "orjson", "orjson-both", "wire")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 1_000])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    command = [str(PYTHON), "-m", "uvicorn", "bench.minimal_http_app:app", "--log-level", "warning"]
    command += ["--host", "127.0.0.1", "--port", str(free_port())]
    env = clean_env(PYTHONPATH=str(REPO_ROOT))
    with (
        tempfile.TemporaryDirectory(prefix="ctxsvc-bench-") as tmp,
        running([command], env=env, cwd=Path(tmp)) as [server],
        httpx.Client(timeout=60) as probe,
    ):
        lean = LeanClient(timeout=600)
        try:
            for n in args.sizes:
                system, tools, items = system_context(), tool_definitions(), agent_conversation(n)
                pruning = PruningWatermark(through_sequence=n // 2)
                body = json.dumps(
                    prepare_body(system, items, tools, pruning=pruning), separators=(",", ":")
                ).encode()
                urls = {
                    name: server.url + ("/bench/raw-echo" if name == "raw echo" else f"/min/{name}")
                    for name in TARGETS
                }
                k = batch_size(n)
                cpu: dict[str, list[float]] = {name: [] for name in TARGETS}
                for i in range(args.rounds + 1):
                    order = list(TARGETS) if i % 2 else list(reversed(TARGETS))
                    for name in order:
                        before = read_probe(probe, server)
                        for _ in range(k):
                            status, answer = lean.post(urls[name], body, HEADERS)
                            if status != 200:
                                raise SystemExit(f"{name}: {status} {answer[:300]!r}")
                        after = read_probe(probe, server)
                        if i:
                            cpu[name].append((after.cpu - before.cpu) / k)
                echo = statistics.median(cpu["raw echo"])
                print(f"{n:>6} msgs ({len(body) / 1e6:.2f} MB, {args.rounds} rounds):")
                for name in TARGETS:
                    c = statistics.median(cpu[name])
                    print(f"    {name:<12} server CPU {c * 1e3:7.2f} ms/request, {c / echo:5.2f}×")
        finally:
            lean.close()


if __name__ == "__main__":
    main()
