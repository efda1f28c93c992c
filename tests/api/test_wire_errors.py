"""Wire errors that teach and methods per path.

Malformed JSON is a 400 that says where (line, column, excerpt); a body declared as something
other than JSON is a 415; ``tool_call.input`` sent as an object says what to send instead;
``HEAD`` works wherever ``GET`` does; ``OPTIONS`` and 405 list every method of the path.
"""

from __future__ import annotations

import httpx
import pytest

from tests.api.helpers import new_session, stored, user

pytestmark = pytest.mark.anyio

JSON = {"content-type": "application/json"}


async def test_malformed_json_says_where(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    raw = b'{"messages": [\n  {"role": "user", "content": [{"type": "text" "text": "hi"}]}\n]}'
    response = await api.post(f"/v1/sessions/{sid}/messages", content=raw, headers=JSON)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == "malformed_json"
    assert (problem["line"], problem["column"]) == (2, 48)
    assert '"text" "text": "hi"' in problem["excerpt"]
    assert "Expecting ',' delimiter at line 2, column 48" in problem["detail"]
    assert await stored(api, sid) == []


@pytest.mark.parametrize(
    ("raw", "line", "column"),
    [(b"{not json", 1, 2), (b"", None, None), (b'{"a": 1}\n\n  x', 3, 3), (b"[1,]", 1, 4)],
)
async def test_malformed_json_everywhere(
    api: httpx.AsyncClient, raw: bytes, line: int | None, column: int | None
) -> None:
    response = await api.post("/v1/prepare", content=raw, headers=JSON)
    if not raw:  # no body at all: the body is required
        assert response.status_code == 422, response.text
        return
    assert response.status_code == 400, response.text
    assert (response.json()["line"], response.json()["column"]) == (line, column)


async def test_a_body_that_is_not_utf8_is_a_400(api: httpx.AsyncClient) -> None:
    response = await api.post("/v1/prepare", content=b'{"a": "\xff"}', headers=JSON)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "malformed_json"
    assert "not UTF-8" in response.json()["detail"]


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data",
        "application/xml",
        None,
    ],
)
async def test_a_body_that_is_not_json_is_a_415(
    api: httpx.AsyncClient, content_type: str | None
) -> None:
    sid = await new_session(api)
    response = await api.post(
        f"/v1/sessions/{sid}/messages",
        content=b'{"messages": [{"role": "user", "content": []}]}',
        headers={"content-type": content_type} if content_type else {},
    )
    assert response.status_code == 415, response.text
    problem = response.json()
    assert problem["code"] == "unsupported_media_type"
    assert "Content-Type: application/json" in problem["detail"]
    assert (content_type or "no Content-Type") in problem["detail"]
    assert await stored(api, sid) == []


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "application/x+json"])
async def test_json_media_types_are_read_as_json(api: httpx.AsyncClient, content_type: str) -> None:
    sid = await new_session(api)
    body = b'{"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}'
    response = await api.post(
        f"/v1/sessions/{sid}/messages", content=body, headers={"content-type": content_type}
    )
    assert response.status_code == 201, response.text


async def test_tool_call_input_sent_as_an_object_says_to_send_its_json_text(
    api: httpx.AsyncClient,
) -> None:
    sid = await new_session(api)
    call = {"type": "tool_call", "id": "c1", "name": "read", "input": {"path": "a.txt"}}
    response = await api.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [user("hi"), {"role": "assistant", "content": [call]}]},
    )
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert "tool_call.input must be the JSON text of the arguments" in detail
    assert '"{\\"path\\": \\"a.txt\\"}"' in detail  # their own object, as the text to send
    assert await stored(api, sid) == []


async def test_a_deep_object_as_tool_call_input_gets_the_same_advice(
    api: httpx.AsyncClient,
) -> None:
    sid = await new_session(api)
    deep = "[" * 500 + "]" * 500  # readable, but no example to make of it
    raw = (
        '{"messages": [{"role": "assistant", "content": [{"type": "tool_call", "id": "c", '
        f'"name": "read", "input": {deep}}}]}}]}}'
    )
    response = await api.post(f"/v1/sessions/{sid}/messages", content=raw.encode(), headers=JSON)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert "must be the JSON text of the arguments" in detail
    assert '"{\\"path\\": \\"README.md\\"}"' in detail  # a generic example instead


async def test_head_answers_wherever_get_does(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    for path in ("/healthz", "/v1/models", f"/v1/sessions/{sid}", f"/v1/sessions/{sid}/messages"):
        get = await api.get(path)
        head = await api.head(path)
        assert head.status_code == get.status_code == 200, path
        assert head.content == b""
        assert head.headers["content-type"] == get.headers["content-type"]
        assert head.headers["content-length"] == get.headers["content-length"]
    missing = await api.head("/v1/sessions/ses-missing")
    assert missing.status_code == 404
    assert missing.content == b""


async def test_head_of_the_event_stream_ends(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    head = await api.head(f"/v1/sessions/{sid}/events")
    assert head.status_code == 200
    assert head.headers["content-type"].startswith("text/event-stream")
    assert head.content == b""


@pytest.mark.parametrize(
    ("path", "methods"),
    [
        ("/v1/models/gpt-5", "GET, HEAD, PUT, DELETE, OPTIONS"),
        ("/v1/sessions", "GET, HEAD, POST, OPTIONS"),
        ("/v1/sessions/ses-x", "GET, HEAD, PATCH, OPTIONS"),
        ("/v1/sessions/ses-x/messages", "GET, HEAD, POST, OPTIONS"),
        ("/v1/prepare", "POST, OPTIONS"),
        ("/healthz", "GET, HEAD, OPTIONS"),
    ],
)
async def test_options_and_405_list_every_method(
    api: httpx.AsyncClient, path: str, methods: str
) -> None:
    options = await api.options(path)
    assert options.status_code == 204
    assert options.headers["allow"] == methods
    refused = await api.request("TRACE", path)
    assert refused.status_code == 405
    assert refused.headers["allow"] == methods
    problem = refused.json()
    assert problem["code"] == "method_not_allowed"
    assert problem["detail"] == f"TRACE is not allowed on this path; it takes {methods}."


async def test_options_of_an_unknown_path_is_a_404(api: httpx.AsyncClient) -> None:
    assert (await api.options("/v1/nothing-here")).status_code == 404
