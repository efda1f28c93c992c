"""Where a stateless ``POST /v1/prepare`` spends the server's CPU: cProfile (the main thread's
CPU time) inside the ``bench/floor_app.py`` process (``BENCH_PROFILE``) over posts of
``bench/floors_http.py``'s body; prints the top functions by cumulative and own time.

Run: ``.venv/bin/python bench/profile_prepare.py [--sizes 100 1000] [--posts 200]``
"""

from __future__ import annotations

import argparse
import io
import json
import pstats
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

from app.core.pipeline.prepared_call import PruningWatermark
from bench.fixtures import agent_conversation, prepare_body, system_context, tool_definitions
from bench.floor_server import floor_server
from bench.lean_client import LeanClient

HEADERS = {"content-type": "application/json"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1_000])
    parser.add_argument("--posts", type=int, default=100)
    parser.add_argument("--top", type=int, default=45)
    parser.add_argument("--path", default="/v1/prepare")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctxsvc-prof-") as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        out = str(Path(tmp) / "prepare.prof")
        settings = {"CTXSVC_MIGRATE_ON_START": "true", "BENCH_PROFILE": out}
        with floor_server(url, Path(tmp), **settings) as server:
            lean = LeanClient(timeout=600)
            try:
                for n in args.sizes:
                    system, tools = system_context(), tool_definitions()
                    items = agent_conversation(n)
                    pruning = PruningWatermark(through_sequence=n // 2)
                    body = json.dumps(
                        prepare_body(system, items, tools, pruning=pruning), separators=(",", ":")
                    ).encode()
                    target = server.url + args.path
                    for _ in range(5):  # warm up
                        lean.post(target, body, HEADERS)
                    lean.post(server.url + "/bench/profile", b"", HEADERS)
                    for _ in range(args.posts):
                        status, answer = lean.post(target, body, HEADERS)
                        assert status == 200, answer[:300]
                    lean.post(server.url + "/bench/profile", b"", HEADERS)
                    print(f"=== {n} messages, {args.posts} posts ({len(body) / 1e6:.2f} MB)")
                    for key in ("cumulative", "tottime"):
                        text = io.StringIO()
                        stats = pstats.Stats(out, stream=text)
                        stats.sort_stats(key).print_stats(args.top)
                        print(text.getvalue())
            finally:
                lean.close()


if __name__ == "__main__":
    main()
