"""The key is checked before a body is read (spec §8), in a real ``ctxsvc serve`` process: an
unauthenticated request that declares a 16 MiB body and sends 1 KiB of it is answered 401
``unauthorized`` at once. A server that read the body first could not answer: the rest of the
body never comes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.helpers import session_body
from tests.ops.raw_http import exchange
from tests.servers import ServerProcess, clean_env, free_port, running, serve_command

pytestmark = pytest.mark.slow

KEY = "key-before-body-3f9a6c2e71d04b58"
DECLARED = 16 * 1024 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    cwd = tmp_path_factory.mktemp("key-first")
    env = clean_env(CTXSVC_API_KEYS=json.dumps([KEY]), CTXSVC_JSON_LOGS="false")
    with running([serve_command(free_port())], env=env, cwd=cwd) as [process]:
        yield process


def head(path: str, authorization: str | None, length: int = DECLARED) -> bytes:
    lines = [
        f"POST {path} HTTP/1.1",
        "Host: 127.0.0.1",
        "Content-Type: application/json",
        f"Content-Length: {length}",
    ]
    if authorization is not None:
        lines.append(f"Authorization: {authorization}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-key", "Basic a2V5OmtleQ=="])
@pytest.mark.parametrize("path", ["/v1/sessions", "/v1/prepare", "/v1/sessions/ses-x/messages"])
def test_an_unauthenticated_body_is_refused_before_it_is_read(
    server: ServerProcess, path: str, authorization: str | None
) -> None:
    answer = exchange(server.port, head(path, authorization) + b"{" + b" " * 1023)
    assert answer.status == 401, answer.body
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.headers["www-authenticate"] == "Bearer"
    assert answer.json()["code"] == "unauthorized"


def test_the_key_comes_before_the_size_and_the_bytes(server: ServerProcess) -> None:
    # Over the body limit, and not UTF-8: neither is looked at without a key.
    answer = exchange(server.port, head("/v1/sessions", None, DECLARED + 1) + b"\xff")
    assert answer.status == 401, answer.body


def test_a_keyed_body_is_read_and_served(server: ServerProcess, tmp_path: Path) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=server.url, headers=auth, timeout=30.0) as client:
        assert client.post("/v1/sessions", json=session_body()).status_code == 201
        # The same connection still serves after a refusal that left its body unread.
        refused = client.post("/v1/sessions", json=session_body(), headers={"Authorization": ""})
        assert refused.status_code == 401
        assert client.post("/v1/sessions", json=session_body()).status_code == 201
    answer = exchange(server.port, head("/v1/sessions", f"Bearer {KEY}", DECLARED + 1))
    assert answer.status == 413  # with the key, the size is checked as before
    assert answer.json()["code"] == "request_too_large"
