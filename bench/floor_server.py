"""A ``uvicorn bench.floor_app:app`` process for the floor benchmarks, and what they read from it
(its CPU time, resident memory and statement counts: ``GET /bench/cpu``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.servers import PYTHON, REPO_ROOT, ServerProcess, clean_env, free_port, running

__all__ = ["Probe", "floor_server", "read_probe"]


@dataclass(frozen=True)
class Probe:
    cpu: float  # seconds of CPU, all the server's threads
    rss: int  # bytes
    statements: int
    transactions: int


def read_probe(client: httpx.Client | None, server: ServerProcess) -> Probe:
    if client is None:
        answer = httpx.get(server.url + "/bench/cpu", timeout=30)
    else:
        answer = client.get(server.url + "/bench/cpu")
    figures = json.loads(answer.content)
    return Probe(figures["cpu"], figures["rss"], figures["statements"], figures["transactions"])


@contextmanager
def floor_server(database_url: str, cwd: Path, **settings: str) -> Iterator[ServerProcess]:
    """One ``bench.floor_app`` uvicorn process on ``database_url`` (already migrated), with the
    ``CTXSVC_*`` ``settings`` given (full names), stopped afterwards."""
    command = [str(PYTHON), "-m", "uvicorn", "bench.floor_app:app", "--log-level", "warning"]
    command += ["--host", "127.0.0.1", "--port", str(free_port())]
    chosen = {
        "CTXSVC_DATABASE_URL": database_url,
        "CTXSVC_MIGRATE_ON_START": "false",
        "CTXSVC_MAX_BODY_BYTES": str(512 * 1024 * 1024),
        "CTXSVC_JSON_LOGS": "false",
        "CTXSVC_LOG_LEVEL": "WARNING",
        "CTXSVC_ALLOW_PRIVATE_MODEL_HOSTS": "true",
        "PYTHONPATH": str(REPO_ROOT),
    }
    env = clean_env(**(chosen | settings))
    with running([command], env=env, cwd=cwd) as [server]:
        yield server
