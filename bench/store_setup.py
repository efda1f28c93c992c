"""What the store benchmarks share (``bench/store.py``, ``bench/world_state.py``,
``bench/turns.py``): a throw-away SQLite or PostgreSQL database, migrated; the app in-process
behind an httpx client; the bench model and session; appends."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
from sqlalchemy import event
from sqlalchemy.engine import make_url

from app.main import create_app
from app.settings import Settings
from app.storage.migrate import upgrade_to_head
from bench.fixtures import BENCH_CAPABILITIES, item_to_json, system_context, tool_definitions

DEFAULT_POSTGRES_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
MODEL_ID = "bench-model"


def libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@asynccontextmanager
async def sqlite_database() -> AsyncIterator[str]:
    with tempfile.TemporaryDirectory(prefix="ctxsvc-bench-") as directory:
        url = f"sqlite+aiosqlite:///{Path(directory) / 'bench.db'}"
        await upgrade_to_head(url)
        yield url


@asynccontextmanager
async def postgres_database(base: str) -> AsyncIterator[str]:
    name = f"ctxsvc_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(libpq(base), autocommit=True, connect_timeout=5) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = make_url(base).set(database=name).render_as_string(hide_password=False)
    try:
        await upgrade_to_head(url)
        yield url
    finally:
        with psycopg.connect(libpq(base), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


POOL_CONNECTS = [0]  # connections the in-process app's pool opened (PostgreSQL)


@asynccontextmanager
async def client_of(url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        database_url=url,
        migrate_on_start=False,
        json_logs=False,
        max_body_bytes=256 * 1024 * 1024,  # the stateless body of 10 000 messages is large
        allow_private_model_hosts=True,  # a fake provider listens on loopback
        _env_file=None,
    )
    app = create_app(settings)

    def counted(*_: object) -> None:
        POOL_CONNECTS[0] += 1

    event.listen(app.state.container.engine.sync_engine, "connect", counted)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://bench", timeout=600.0
        ) as client:
            yield client


def ok(response: httpx.Response, *status: int) -> dict[str, Any]:
    if response.status_code not in (status or (200,)):
        raise SystemExit(
            f"{response.request.method} {response.request.url}: "
            f"{response.status_code} {response.text[:500]}"
        )
    result: dict[str, Any] = response.json()
    return result


def done(response: httpx.Response, *status: int) -> None:
    """``ok`` without decoding the answer (timed calls: the client's JSON is not the service's)."""
    if response.status_code not in (status or (200,)):
        ok(response, *status)


async def register_model_and_session(client: httpx.AsyncClient) -> str:
    caps = BENCH_CAPABILITIES
    # A window larger than 10 000 messages: a session prepare at the trigger line would compact.
    model = {
        "context_window_tokens": 50 * caps.context_window_tokens,
        "max_output_tokens": caps.max_output_tokens,
        "provider": {"kind": "local"},
    }
    ok(await client.put(f"/v1/models/{MODEL_ID}", json=model), 200, 201)  # 201 when new
    system = system_context()[0].content[0]
    assert system["type"] == "text"
    body = {
        "model_id": MODEL_ID,
        "agent": {"system_prompt": system["text"], "tools": tool_definitions(), "preset": "coding"},
    }
    return str(ok(await client.post("/v1/sessions", json=body), 201)["id"])


def note(i: int) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": f"note {i}: " + "x" * 200}]}


async def fill(client: httpx.AsyncClient, session_id: str, items: list[Any], batch: int) -> None:
    url = f"/v1/sessions/{session_id}/messages"
    for start in range(0, len(items), batch):
        messages = [
            {"role": j["role"], "kind": j["kind"], "content": j["content"]}
            for j in map(item_to_json, items[start : start + batch])
        ]
        done(await client.post(url, json={"messages": messages}), 201)
