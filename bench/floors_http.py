"""``POST /v1/prepare`` ÷ a raw-bytes ASGI echo of the same body through the same uvicorn
process (``bench/floor_app.py``): target ≤ 2.0×.

One server process serves both; the same body goes to each in alternating rounds (the order
flips every round), a batch of posts per round. Printed per size: the median of the rounds of
the server's CPU time per request (read from the process itself before and after each batch:
the figure a loaded machine leaves alone) and of the client's wall time per request, and their
ratios. The body is ``bench/prepare.py`` (d)'s: ``bench.fixtures``' agent conversation.

Run: ``.venv/bin/python bench/floors_http.py [sizes...]`` (default 100 1000 10000; a few
minutes; ``--rounds`` for more).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

import httpx

from app.core.pipeline.prepared_call import PruningWatermark
from bench.fixtures import agent_conversation, prepare_body, system_context, tool_definitions
from bench.floor_server import floor_server, read_probe
from bench.lean_client import LeanClient
from tests.servers import ServerProcess

TARGET = 2.0
HEADERS = {"content-type": "application/json"}


def batch_size(n: int) -> int:
    """Posts per round: enough to read well above the server clock's resolution."""
    return 10 if n <= 100 else 4 if n <= 1_000 else 1


def measure(
    server: ServerProcess, lean: LeanClient, probe: httpx.Client, n: int, rounds: int
) -> dict[str, tuple[float, float]]:
    """Per target: the median server CPU and client wall seconds per request."""
    system, tools, items = system_context(), tool_definitions(), agent_conversation(n)
    body = json.dumps(
        prepare_body(system, items, tools, pruning=PruningWatermark(through_sequence=n // 2)),
        separators=(",", ":"),
    ).encode()
    targets = {"prepare": server.url + "/v1/prepare", "raw echo": server.url + "/bench/raw-echo"}
    k = batch_size(n)
    cpu: dict[str, list[float]] = {name: [] for name in targets}
    wall: dict[str, list[float]] = {name: [] for name in targets}
    for i in range(rounds + 1):
        order = list(targets) if i % 2 else list(reversed(targets))
        for name in order:
            before = read_probe(probe, server)
            started = time.perf_counter()
            for _ in range(k):
                status, answer = lean.post(targets[name], body, HEADERS)
                if status != 200:
                    raise SystemExit(f"{name}: {status} {answer[:300]!r}")
            elapsed = time.perf_counter() - started
            after = read_probe(probe, server)
            if i:  # the first round warms up
                cpu[name].append((after.cpu - before.cpu) / k)
                wall[name].append(elapsed / k)
    print(f"{n:>6} msgs ({len(body) / 1e6:.2f} MB, {k} posts a round, {rounds} rounds):")
    figures = {name: (statistics.median(cpu[name]), statistics.median(wall[name])) for name in cpu}
    for name, (c, w) in figures.items():
        print(f"    {name:<9} server CPU {c * 1e3:8.2f} ms/request, client wall {w * 1e3:8.2f} ms")
    (c_p, w_p), (c_e, w_e) = figures["prepare"], figures["raw echo"]
    verdict = "met" if c_p / c_e <= TARGET else "MISSED"
    print(
        f"    ratio prepare ÷ raw echo: CPU {c_p / c_e:.2f}×, wall {w_p / w_e:.2f}× "
        f"(target ≤ {TARGET}× on CPU: {verdict})"
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 1_000, 10_000])
    parser.add_argument("--rounds", type=int, default=0, help="rounds per size (default: by size)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctxsvc-bench-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        with (
            floor_server(url, Path(tmp), CTXSVC_MIGRATE_ON_START="true") as server,
            httpx.Client(timeout=60) as probe,
        ):
            lean = LeanClient(timeout=600)
            try:
                for n in args.sizes:
                    rounds = args.rounds or (15 if n <= 1_000 else 7)
                    measure(server, lean, probe, n, rounds)
            finally:
                lean.close()


if __name__ == "__main__":
    main()
