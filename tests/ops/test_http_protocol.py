"""What ``ctxsvc serve`` answers before any route runs (spec §8), in a real process: a request
head past ``CTXSVC_MAX_HEADER_BYTES`` is 431 ``headers_too_large`` and is not read on; a request
that is not HTTP/1.1 (NUL in a header, a bad ``Content-Length``) is 400 ``malformed_request``;
both in the one problem shape, never uvicorn's plain text."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.ops.raw_http import TIMEOUT_SECONDS, Answer, exchange
from tests.servers import ServerProcess, clean_env, free_port, running, serve_command

pytestmark = pytest.mark.slow

LIMIT = 8192


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    cwd = tmp_path_factory.mktemp("http-protocol")
    env = clean_env(CTXSVC_MAX_HEADER_BYTES=str(LIMIT), CTXSVC_JSON_LOGS="false")
    with running([serve_command(free_port())], env=env, cwd=cwd) as [process]:
        yield process


def padded(counted: int) -> bytes:
    """A GET /healthz whose URL and header lines count ``counted`` bytes: each header line
    counts its name, its value and 4 (``": "`` and CRLF), as documented."""
    fixed = len("/healthz") + len("host") + len("x") + 4 + len("x-pad") + 4
    pad = "a" * (counted - fixed)
    return f"GET /healthz HTTP/1.1\r\nhost: x\r\nx-pad: {pad}\r\n\r\n".encode()


def assert_problem(answer: Answer, status: int, code: str) -> None:
    assert answer.status == status, answer.body
    assert answer.headers["content-type"] == "application/problem+json"
    problem = answer.json()
    assert (problem["status"], problem["code"]) == (status, code)
    assert set(problem) == {"type", "title", "status", "detail", "code"}


def sent_before_refused(sock: socket.socket, chunk: bytes, total: int) -> int | None:
    """How many bytes went out before the server closed the connection (``None``: all)."""
    sent = 0
    try:
        while sent < total:
            sock.sendall(chunk)
            sent += len(chunk)
    except ConnectionError:  # a broken pipe or a reset: the server closed
        return sent
    return None


def test_a_head_at_the_limit_is_served(server: ServerProcess) -> None:
    answer = exchange(server.port, padded(LIMIT))
    assert answer.status == 200, answer.body


def test_a_head_one_byte_over_is_431(server: ServerProcess) -> None:
    answer = exchange(server.port, padded(LIMIT + 1))
    assert_problem(answer, 431, "headers_too_large")
    assert f"exceed {LIMIT} bytes" in answer.json()["detail"]


def test_a_long_path_is_431(server: ServerProcess) -> None:
    answer = exchange(server.port, b"GET /" + b"p" * 100_000 + b" HTTP/1.1\r\nhost: x\r\n\r\n")
    assert_problem(answer, 431, "headers_too_large")


def test_a_huge_header_is_not_read_on(server: ServerProcess) -> None:
    # 64 MiB of one header: the server stops reading near the limit and closes the connection,
    # so sending fails long before the end (a server that buffered it all would take it all).
    with socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT_SECONDS) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-huge: ")
        sent = sent_before_refused(sock, b"a" * 65536, 64 * 1024 * 1024)
    assert sent is not None
    assert sent < 16 * 1024 * 1024
    assert httpx.get(server.url + "/healthz", timeout=TIMEOUT_SECONDS).status_code == 200


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-a: a\x00b\r\n\r\n",  # NUL in a header
        b"POST /v1/prepare HTTP/1.1\r\nhost: x\r\ncontent-length: abc\r\n\r\n{}",
        b"POST /v1/prepare HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}",
        b"GET /healthz HTTP/9.9\r\nhost: x\r\n\r\n",
        b"GET\x00 /healthz HTTP/1.1\r\nhost: x\r\n\r\n",
    ],
)
def test_a_request_that_is_not_http_is_a_problem_400(
    server: ServerProcess, request_bytes: bytes
) -> None:
    answer = exchange(server.port, request_bytes)
    assert_problem(answer, 400, "malformed_request")


def test_bodies_on_a_kept_alive_connection_are_not_counted_as_heads(server: ServerProcess) -> None:
    # 1 MB bodies, each 128 times the head limit, then more requests on the same connection.
    with httpx.Client(base_url=server.url, timeout=TIMEOUT_SECONDS) as client:
        for _ in range(3):
            counted = client.post(
                "/v1/tokens/count", json={"counter": "estimate", "text": "a" * 10**6}
            )
            assert counted.status_code == 200, counted.text
            assert counted.json()["tokens"] == 250_000
            assert client.get("/healthz").status_code == 200


def test_every_worker_runs_the_bounded_protocol(tmp_path: Path) -> None:
    env = clean_env(CTXSVC_MAX_HEADER_BYTES=str(LIMIT), CTXSVC_JSON_LOGS="false")
    command = [*serve_command(free_port()), "--workers", "2"]
    with running([command], env=env, cwd=tmp_path) as [process]:
        for _ in range(4):  # a connection each: the kernel spreads them over the workers
            assert_problem(exchange(process.port, padded(LIMIT + 1)), 431, "headers_too_large")
            assert exchange(process.port, padded(LIMIT)).status == 200
