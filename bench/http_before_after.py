"""``POST /v1/prepare`` of an earlier commit and of this tree, in one run.

Run: ``.venv/bin/python bench/http_before_after.py --rev 51fe7ac 100 1000``. The commit is
unpacked with ``git archive`` into a temporary directory and served by its own uvicorn process
(this environment's packages), beside this tree's service and the echo endpoint of
``bench/prepare.py`` (d); the three are called alternately with both clients (``httpx.Client``
and ``bench/lean_client.py``), and LangChain's trim runs once per round. Both services must
answer the same body with the same bytes (checked).
"""

from __future__ import annotations

import argparse
import io
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from app.core.pipeline.prepared_call import PruningWatermark
from bench.fixtures import agent_conversation, prepare_body, system_context, tool_definitions
from bench.lean_client import LeanClient
from bench.prepare import Post, alternate, dumps, langchain_trim
from tests.servers import PYTHON, REPO_ROOT, clean_env, free_port, running

RUNS = 21


def _unpack(rev: str, into: Path) -> None:
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", rev], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")


def _uvicorn(app: str) -> list[str]:
    command = [str(PYTHON), "-m", "uvicorn", app, "--log-level", "warning"]
    return [*command, "--host", "127.0.0.1", "--port", str(free_port())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rev", required=True, help="the earlier commit")
    parser.add_argument("sizes", nargs="*", type=int, default=[100, 1_000])
    args = parser.parse_args()
    settings = {
        "CTXSVC_MAX_BODY_BYTES": str(256 * 1024 * 1024),
        "CTXSVC_JSON_LOGS": "false",
        "CTXSVC_LOG_LEVEL": "WARNING",
    }
    with tempfile.TemporaryDirectory(prefix="ctxsvc-bench-") as tmp:
        root = Path(tmp)
        before_tree, before_run, after_run = root / "tree", root / "before", root / "after"
        for path in (before_tree, before_run, after_run):
            path.mkdir()
        _unpack(args.rev, before_tree)
        after_env = clean_env(
            CTXSVC_DATABASE_URL=f"sqlite:///{after_run / 'b.db'}",
            PYTHONPATH=str(REPO_ROOT),
            **settings,
        )
        before_env = clean_env(
            CTXSVC_DATABASE_URL=f"sqlite:///{before_run / 'b.db'}",
            PYTHONPATH=str(before_tree),
            **settings,
        )
        lean = LeanClient(timeout=600)
        with (
            running(
                [_uvicorn("app.main:app"), _uvicorn("bench.echo_app:app")],
                env=after_env,
                cwd=after_run,
            ) as (after, echo),
            running([_uvicorn("app.main:app")], env=before_env, cwd=before_run) as (before,),
            httpx.Client(timeout=600) as full,
        ):

            def post_httpx(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
                response = full.post(url, content=body, headers=headers)
                return response.status_code, response.content

            clients: dict[str, Post] = {"httpx": post_httpx, "http.client": lean.post}
            targets = {
                "before": before.url + "/v1/prepare",
                "after": after.url + "/v1/prepare",
                "echo": echo.url + "/echo",
            }
            try:
                for n in args.sizes:
                    _compare(n, clients, targets)
            finally:
                lean.close()


def _compare(n: int, clients: dict[str, Post], targets: dict[str, str]) -> None:
    system, tools, items = system_context(), tool_definitions(), agent_conversation(n)
    pruning = PruningWatermark(through_sequence=n // 2)
    body = dumps(prepare_body(system, items, tools, pruning=pruning)).encode()
    trim = langchain_trim(system, items)
    assert trim is not None, "pip install -e '.[bench]' (LangChain)"
    samples, langchain, answers = alternate(body, clients, targets, trim, RUNS)
    t_lc = statistics.median(langchain)
    same = "the same bytes" if answers["before"] == answers["after"] else "DIFFERENT bytes"
    print(f"{n} msgs ({len(body) / 1e6:.2f} MB): LangChain {t_lc * 1e3:.2f} ms; answers: {same}")
    for client in clients:
        t = {name: statistics.median(samples[client, name]) for name in targets}
        figures = " | ".join(
            f"{name} {t[name] * 1e3:6.2f} ms ({t[name] / t_lc:5.2f}× LangChain,"
            f" {t[name] / t['echo']:4.2f}× echo)"
            for name in ("before", "after")
        )
        print(f"  {client:<11} {figures} | echo {t['echo'] * 1e3:6.2f} ms")


if __name__ == "__main__":
    main()
