"""A body validated from its bytes (``JsonBodyRoute``) is read exactly as FastAPI reads it.

Two routes take the same model, one the usual way and one from the raw bytes; every body gets
the same answer from both: the same value when it is valid, the same error when it is not. The
same for a ``BodyInput`` (read by its own ``decode`` first), against FastAPI's usual reading of
the very same type (its model validated, then read by ``of``).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI

from app.api.inputs.appends import AppendInput
from app.api.inputs.prepare import PrepareInput
from app.api.inputs.tokens import TokenCountInput
from app.api.jsonbody import JsonBodyRoute
from app.api.problems import install_error_handlers
from app.api.routes import prepare, sessions, tokens
from app.api.schemas.prepare import PrepareBody
from app.api.schemas.sessions import AppendBody
from app.api.schemas.tokens import TokenCountBody

pytestmark = pytest.mark.anyio

usual = APIRouter()
once = APIRouter(route_class=JsonBodyRoute)


@usual.post("/usual")
async def read_usual(body: PrepareBody) -> dict[str, Any]:
    return {"type": type(body).__name__, "body": body.model_dump(mode="json")}


@once.post("/once")
async def read_once(body: PrepareBody) -> dict[str, Any]:
    return {"type": type(body).__name__, "body": body.model_dump(mode="json")}


def _repr_route(router: APIRouter, path: str, kind: type[Any]) -> None:
    """``POST path`` answering the ``repr`` of its body read as ``kind``."""

    async def read(body: Any) -> dict[str, Any]:
        return {"input": repr(body)}

    read.__annotations__ = {"body": kind, "return": dict[str, Any]}
    router.post(path)(read)


INPUT_KINDS: dict[str, type[Any]] = {
    "prepare": PrepareInput,
    "tokens": TokenCountInput,
    "append": AppendInput,
}
for name, kind in INPUT_KINDS.items():
    _repr_route(usual, f"/usual/{name}", kind)  # FastAPI's usual reading of the same type
    _repr_route(once, f"/once/{name}", kind)


@pytest.fixture
def both() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)  # the service's problem answers, as in the app
    app.include_router(usual)
    app.include_router(once)
    return app


MODEL = {"context_window_tokens": 1000, "max_output_tokens": 100}
TEXT = [{"type": "text", "text": "ünï 界 😀"}]
VALID = [
    {"model": MODEL},
    {
        "model": MODEL,
        "system_context": [{"key": "a", "content": TEXT}],
        "conversation": [
            {"role": "user", "content": TEXT},
            {
                "role": "assistant",
                "content": [{"type": "tool_call", "id": "c1", "name": "t", "input": "{}"}],
            },
            {
                "role": "tool",
                "content": [{"type": "tool_result", "id": "c1", "output": TEXT}],
                "origin": {"type": "real", "message_id": "m", "sequence": 3},
            },
        ],
        "tools": [{"name": "t", "input_schema": {"type": "object", "minimum": 1.5e-05}}],
        "tool_result_pruning": {"through_sequence": 2},
    },
]
INVALID: list[bytes] = [
    b"{",
    b'{"model": ',
    b"[]",
    b"null",
    b'{"model": {"context_window_tokens": "x", "max_output_tokens": 1}}',
    b'{"model_id": "a", "model": {}}',
    json.dumps({"model": MODEL, "conversation": [{"role": "robot", "content": []}]}).encode(),
    json.dumps({"model": MODEL, "unknown": 1}).encode(),
    json.dumps({"model": MODEL, "conversation": [{"role": "user", "content": [{}]}]}).encode(),
    b'{"model": {"context_window_tokens": NaN, "max_output_tokens": 1}}',
    b"\xff\xfe",
    # A validator's own error (the store's rule for tool results: invalid_block, 422).
    json.dumps(
        {
            "model": MODEL,
            "conversation": [
                {"role": "user", "content": [{"type": "tool_result", "id": "c", "output": []}]}
            ],
        }
    ).encode(),
]


async def _post(app: FastAPI, path: str, body: bytes) -> tuple[int, Any]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        response = await client.post(
            path, content=body, headers={"content-type": "application/json"}
        )
    return response.status_code, response.json()


@pytest.mark.parametrize("body", VALID, ids=range(len(VALID)))
async def test_a_valid_body_is_the_same_model(both: FastAPI, body: dict[str, Any]) -> None:
    raw = json.dumps(body).encode()
    assert await _post(both, "/once", raw) == await _post(both, "/usual", raw)
    status, answer = await _post(both, "/once", raw)
    assert status == 200
    assert answer["type"] == "PrepareBody"


@pytest.mark.parametrize("raw", INVALID, ids=range(len(INVALID)))
async def test_an_invalid_body_gets_the_error_it_always_got(both: FastAPI, raw: bytes) -> None:
    once_answer = await _post(both, "/once", raw)
    assert once_answer == await _post(both, "/usual", raw)
    assert once_answer[0] != 200


def _tokens(prepare: dict[str, Any]) -> list[bytes]:
    # Token-count bodies around each prepare body: as ``prepare``, beside a text, and alone.
    raw = json.dumps(prepare).encode()
    return [b'{"prepare": ' + raw + b"}", b'{"text": "a", "prepare": ' + raw + b"}", raw]


INPUTS: list[tuple[str, bytes]] = [
    *[("prepare", json.dumps(b).encode()) for b in VALID],
    *[("prepare", raw) for raw in INVALID],
    *[("tokens", raw) for body in VALID for raw in _tokens(body)],
    ("tokens", json.dumps({"content": TEXT, "counter": "estimate"}).encode()),
    ("tokens", json.dumps({"content": [{"type": "text"}]}).encode()),
    ("tokens", b"{}"),
    ("append", json.dumps({"messages": VALID[1]["conversation"][:1]}).encode()),
    ("append", json.dumps({"messages": VALID[1]["conversation"]}).encode()),  # an origin
    ("append", b'{"messages": []}'),
    ("append", b'{"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]}'),
]


@pytest.mark.parametrize(("kind", "raw"), INPUTS, ids=range(len(INPUTS)))
async def test_a_body_input_gets_the_answer_of_the_usual_reading(
    both: FastAPI, kind: str, raw: bytes
) -> None:
    assert await _post(both, f"/once/{kind}", raw) == await _post(both, f"/usual/{kind}", raw)


def test_the_service_reads_its_large_bodies_once() -> None:
    # The routes of the large bodies: the stateless prepare, token counts, appends.
    routes = {
        (route.path, method): route
        for router in (prepare.router, tokens.router, sessions.router)
        for route in router.routes
        for method in getattr(route, "methods", ())
    }
    for key, kind, model in [
        (("/v1/prepare", "POST"), PrepareInput, PrepareBody),
        (("/v1/tokens/count", "POST"), TokenCountInput, TokenCountBody),
        (("/v1/sessions/{session_id}/messages", "POST"), AppendInput, AppendBody),
    ]:
        route = routes[key]
        assert isinstance(route, JsonBodyRoute), key
        assert route.body_type is kind, key  # read by its own ``decode`` first
        assert route.body_model is model, key
