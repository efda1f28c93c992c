"""A database outage is an operating condition, not a bug (spec §8): requests answer 503
``database_unavailable`` with ``Retry-After``, the log gets one line (no traceback per request),
``/readyz`` says not ready, and the service recovers without a restart.

PostgreSQL goes away behind a TCP proxy the test cuts (refused connections, established ones
reset); the shared server itself is never stopped. A full SQLite disk is a 2 MiB tmpfs."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from tests.api.helpers import session_body, user
from tests.ops.tcp_proxy import TcpProxy
from tests.servers import one_server

pytestmark = pytest.mark.slow

DEADLINE_SECONDS = 90.0
REQUESTS_DURING_OUTAGE = 20


def wait_for_status(client: httpx.Client, path: str, status: int) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while (answer := client.get(path)).status_code != status:
        assert time.monotonic() < deadline, (path, answer.status_code, answer.text)
        time.sleep(0.2)


def append_text(client: httpx.Client, sid: str, text: str) -> httpx.Response:
    return client.post(f"/v1/sessions/{sid}/messages", json={"messages": [user(text)]})


def assert_outage_answer(answer: httpx.Response, reason: str) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert int(answer.headers["retry-after"]) > 0
    body = answer.json()
    assert body["code"] == "database_unavailable"
    assert body["reason"] == reason


def texts(client: httpx.Client, sid: str) -> list[str]:
    listed = client.get(f"/v1/sessions/{sid}/messages")
    assert listed.status_code == 200, listed.text
    return [m["content"][0]["text"] for m in listed.json()["messages"]]


def outage_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if "database unavailable" in line]


@pytest.mark.postgres
def test_postgresql_going_away_answers_503_logs_once_and_recovers(
    postgres_url: str, tmp_path: Path
) -> None:
    url = make_url(postgres_url)
    with TcpProxy(url.host or "127.0.0.1", url.port or 5432) as proxy:
        proxied = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        with (
            one_server(proxied, tmp_path) as server,
            httpx.Client(base_url=server.url, timeout=30) as client,
        ):
            sid = client.post("/v1/sessions", json=session_body()).json()["id"]
            assert append_text(client, sid, "before").status_code == 201
            proxy.cut()
            for i in range(REQUESTS_DURING_OUTAGE):
                assert_outage_answer(append_text(client, sid, f"lost {i}"), "unreachable")
            assert_outage_answer(client.get(f"/v1/sessions/{sid}"), "unreachable")
            assert client.get("/readyz").status_code == 503
            proxy.restore()
            wait_for_status(client, "/readyz", 200)
            assert append_text(client, sid, "after").status_code == 201
            assert texts(client, sid) == ["before", "after"]
        log = server.log()
    assert "Traceback" not in log
    # One line for the outage, however many requests met it (rate-limited per kind).
    assert 1 <= len(outage_lines(log)) <= 2, outage_lines(log)
    assert "database available again" in log


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a full disk needs a 2 MiB tmpfs, and mounting one needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"mounting a 2 MiB tmpfs is not permitted here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_sqlite_disk_answers_503_turns_readiness_off_and_recovers(
    sqlite_template: Path, small_disk: Path, tmp_path: Path
) -> None:
    database = small_disk / "ctxsvc.db"
    shutil.copyfile(sqlite_template, database)
    filler = small_disk / "filler"
    with one_server(f"sqlite+aiosqlite:///{database}", tmp_path) as server:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            sid = client.post("/v1/sessions", json=session_body()).json()["id"]
            assert append_text(client, sid, "before").status_code == 201
            # Fill the disk to the last byte, then ask for more than is left.
            free = os.statvfs(small_disk)
            filler.write_bytes(b"\0" * (free.f_bavail * free.f_frsize))
            acknowledged = ["before"]
            answer = append_text(client, sid, "x" * 20_000)
            for i in range(REQUESTS_DURING_OUTAGE):
                if answer.status_code == 201:  # a page still fitted
                    acknowledged.append("x" * 20_000)
                    answer = append_text(client, sid, "x" * 20_000)
                    continue
                assert_outage_answer(answer, "full")
                answer = append_text(client, sid, f"lost {i}")
            assert_outage_answer(answer, "full")
            assert client.get("/readyz").status_code == 503
            filler.unlink()
            wait_for_status(client, "/readyz", 200)
            assert append_text(client, sid, "after").status_code == 201
            assert texts(client, sid) == [*acknowledged, "after"]
        log = server.log()
    assert "Traceback" not in log
    assert 1 <= len(outage_lines(log)) <= 2, outage_lines(log)
