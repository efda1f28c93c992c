"""``ctxsvc serve --workers N``: any worker's ``/metrics`` answers for all of them
(prometheus-client's multiprocess mode, in a directory the command creates and removes)."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
import pytest

from tests.api.helpers import session_body
from tests.ops.test_observability import samples, value
from tests.servers import ServerProcess, clean_env, free_port, serve_command

pytestmark = pytest.mark.slow

REQUESTS = 40


def fresh_get(url: str) -> httpx.Response:
    """One request on a connection of its own, so the kernel spreads them over the workers."""
    with httpx.Client(timeout=30, headers={"Connection": "close"}) as client:
        return client.get(url)


def test_two_workers_report_summed_counters_and_each_process(
    sqlite_template: Path, tmp_path: Path
) -> None:
    database = tmp_path / "ctxsvc.db"
    shutil.copyfile(sqlite_template, database)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = clean_env(
        CTXSVC_DATABASE_URL=f"sqlite+aiosqlite:///{database}",
        CTXSVC_MIGRATE_ON_START="false",
        CTXSVC_JSON_LOGS="false",
        TMPDIR=str(scratch),
    )
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    command = [*serve_command(free_port()), "--workers", "2"]
    server = ServerProcess(command, env, cwd=tmp_path, log_path=tmp_path / "server.log")
    server.start()
    try:
        for _ in range(REQUESTS):
            assert fresh_get(server.url + "/healthz").status_code == 200
        with httpx.Client(base_url=server.url, timeout=30) as api:
            sid = api.post("/v1/sessions", json=session_body()).json()["id"]
            turn = api.post(
                f"/v1/sessions/{sid}/turns",
                params={"wait": "true"},
                json={"client_request_id": "w", "input": [{"type": "text", "text": "hi"}]},
            ).json()
            assert turn["status"] == "completed", turn
        # Whichever worker answers a scrape reports every worker's requests and the turn.
        pids: set[str] = set()
        for _ in range(8):
            found = samples(fresh_get(server.url + "/metrics").text)
            assert value(found, "ctxsvc_http_requests_total", route="/healthz") == REQUESTS
            assert value(found, "ctxsvc_turns_finished_total", status="completed") == 1
            resident = [s for s in found if s.name == "process_resident_memory_bytes"]
            assert all(s.value > 0 for s in resident)
            pids |= {s.labels["pid"] for s in resident}
        assert len(pids) == 2, pids  # both workers' memory, each labelled with its pid
        assert value(found, "python_gc_collections_total", generation="0") > 0
    finally:
        server.stop()
    # The directory the command made for the workers' files is gone with it.
    assert list(scratch.glob("ctxsvc-metrics-*")) == []
