"""``ctxsvc serve --workers 2`` starts, serves and stops cleanly on both engines: master and
every worker exit when the master gets SIGTERM (a worker once hung at start on PostgreSQL, in a
GC callback that wrote a metric inside prometheus-client's own lock)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.api.helpers import session_body
from tests.servers import ServerProcess, clean_env, free_port, serve_command

pytestmark = pytest.mark.slow

# Generous: two interpreters importing the app on a loaded 2-core machine.
READY_DEADLINE_SECONDS = 120.0
STOP_DEADLINE_SECONDS = 60.0


def children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        text = (task / "children").read_text()
        found |= {int(word) for word in text.split()}
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited


def test_two_workers_start_serve_and_stop_on_sigterm(database_url: str, tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = clean_env(
        CTXSVC_DATABASE_URL=database_url,
        CTXSVC_MIGRATE_ON_START="false",
        CTXSVC_JSON_LOGS="false",
        TMPDIR=str(scratch),
        PYTHONFAULTHANDLER="1",
    )
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    command = [*serve_command(free_port()), "--workers", "2"]
    server = ServerProcess(command, env, cwd=tmp_path, log_path=tmp_path / "server.log")
    server.launch()
    assert server.process is not None
    master = server.process.pid
    try:
        with httpx.Client(timeout=10.0) as client:
            server.wait_ready(client, time.monotonic() + READY_DEADLINE_SECONDS)
            deadline = time.monotonic() + READY_DEADLINE_SECONDS
            while len(workers := children(master)) < 2:  # the second may still be booting
                assert time.monotonic() < deadline, server.log()
                time.sleep(0.1)
            # Every worker answers: fresh connections spread over them; all must be served.
            for _ in range(20):
                created = client.post(
                    server.url + "/v1/sessions",
                    json=session_body(),
                    headers={"Connection": "close"},
                )
                assert created.status_code == 201, created.text
            assert client.get(server.url + "/metrics").status_code == 200
        server.process.send_signal(signal.SIGTERM)
        try:
            code = server.process.wait(STOP_DEADLINE_SECONDS)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the master did not stop on SIGTERM:\n{server.log()}")
        assert code == 0, server.log()
        deadline = time.monotonic() + STOP_DEADLINE_SECONDS
        while any(alive(pid) for pid in workers):
            assert time.monotonic() < deadline, f"orphaned workers {workers}:\n{server.log()}"
            time.sleep(0.1)
    finally:
        for pid in children(master) if alive(master) else set():
            os.kill(pid, signal.SIGKILL)
        server.kill()
    assert list(scratch.glob("ctxsvc-metrics-*")) == []
