"""``bench/floors_http.py`` for two checkouts at once: the same body posted in alternation to
two ``bench.floor_app`` servers (this tree's and another checkout's, each with its own
virtualenv), round by round (the order flipping every round), so both are measured under the
same load. Prints per size the median server CPU per request of each one's prepare and raw echo,
their ratios, and new ÷ old.

Run: ``.venv/bin/python bench/floors_http_ab.py /work/main [sizes...] [--rounds N]``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script too

import httpx

from app.core.pipeline.prepared_call import PruningWatermark
from bench.fixtures import agent_conversation, prepare_body, system_context, tool_definitions
from bench.floor_server import read_probe
from bench.floors_http import HEADERS, batch_size
from bench.lean_client import LeanClient
from tests.servers import REPO_ROOT, ServerProcess, clean_env, free_port, running


def server(stack: ExitStack, root: Path, tmp: Path, name: str) -> ServerProcess:
    python = root / ".venv" / "bin" / "python"
    command = [str(python), "-m", "uvicorn", "bench.floor_app:app", "--log-level", "warning"]
    command += ["--host", "127.0.0.1", "--port", str(free_port())]
    env = clean_env(
        CTXSVC_DATABASE_URL=f"sqlite:///{tmp / (name + '.db')}",
        CTXSVC_MIGRATE_ON_START="true",
        CTXSVC_MAX_BODY_BYTES=str(512 * 1024 * 1024),
        CTXSVC_JSON_LOGS="false",
        CTXSVC_LOG_LEVEL="WARNING",
        PYTHONPATH=str(root),
    )
    workdir = tmp / name
    workdir.mkdir()
    [started] = stack.enter_context(running([command], env=env, cwd=workdir))
    return started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", type=Path, help="the other checkout (its .venv is used)")
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 1_000])
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args()
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ctxsvc-ab-")))
        servers = {
            "old": server(stack, args.old, tmp, "old"),
            "new": server(stack, REPO_ROOT, tmp, "new"),
        }
        probe = stack.enter_context(httpx.Client(timeout=60))
        lean = LeanClient(timeout=600)
        stack.callback(lean.close)
        for n in args.sizes:
            system, tools, items = system_context(), tool_definitions(), agent_conversation(n)
            pruning = PruningWatermark(through_sequence=n // 2)
            body = json.dumps(
                prepare_body(system, items, tools, pruning=pruning), separators=(",", ":")
            ).encode()
            answers = {
                name: lean.post(s.url + "/v1/prepare", body, HEADERS) for name, s in servers.items()
            }
            same = answers["old"] == answers["new"]
            runs = [(who, path) for who in servers for path in ("/v1/prepare", "/bench/raw-echo")]
            cpu: dict[tuple[str, str], list[float]] = {run: [] for run in runs}
            k = batch_size(n)
            for i in range(args.rounds + 1):
                for who, path in runs if i % 2 else list(reversed(runs)):
                    s = servers[who]
                    before = read_probe(probe, s)
                    for _ in range(k):
                        status, answer = lean.post(s.url + path, body, HEADERS)
                        if status != 200:
                            raise SystemExit(f"{who} {path}: {status} {answer[:300]!r}")
                    after = read_probe(probe, s)
                    if i:
                        cpu[(who, path)].append((after.cpu - before.cpu) / k)
            med = {run: statistics.median(v) for run, v in cpu.items()}
            print(
                f"{n:>6} msgs ({len(body) / 1e6:.2f} MB, {k} posts a round, {args.rounds} rounds;"
                f" answers byte-identical: {same}):"
            )
            for who in servers:
                p, e = med[(who, "/v1/prepare")], med[(who, "/bench/raw-echo")]
                figures = f"prepare {p * 1e3:7.2f} ms, raw echo {e * 1e3:5.2f} ms"
                print(f"    {who}: {figures}, {p / e:5.2f}×")
            ratio = med[("new", "/v1/prepare")] / med[("old", "/v1/prepare")]
            print(f"    new ÷ old prepare CPU: {ratio:.3f}")


if __name__ == "__main__":
    main()
