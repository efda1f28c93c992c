"""A request body is JSON in UTF-8 (spec §8), decided once, before any reader guesses: bytes
that are not UTF-8 (an encoded surrogate), UTF-16 and UTF-32 bodies (with a byte order mark or
without) answer 400 ``malformed_json`` and nothing is stored, on SQLite and PostgreSQL alike.
What the UTF-8 body holds is then checked as decoded text: U+0000 in a title or any stored text
is 422 ``invalid_request``. An integer past Python's digit limit is 422 ``invalid_request``."""

from __future__ import annotations

import json
import sys
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.api.limits import not_utf8, unstorable_text
from tests.api.helpers import new_session, session_body, stored, user

pytestmark = pytest.mark.anyio

JSON = {"content-type": "application/json"}
SURROGATE = b"\xed\xa0\x80"  # U+D800 encoded as if it were a character: not UTF-8


def with_raw(body: dict[str, Any], raw: bytes) -> bytes:
    """``body`` as UTF-8 JSON with its one ``"RAW"`` string's letters replaced by ``raw``."""
    return json.dumps(body).encode().replace(b"RAW", raw)


async def session_ids(api: httpx.AsyncClient) -> list[str]:
    """The newest sessions' ids (the PostgreSQL database is shared by the tests of a run)."""
    page = (await api.get("/v1/sessions", params={"limit": 100})).json()
    return [s["id"] for s in page["sessions"]]


def utf16(body: dict[str, Any], encoding: str) -> bytes:
    """``body`` as JSON in ``encoding``, its text holding U+0000 as an escape."""
    return json.dumps(body).replace("RAW", "a\\u0000b").encode(encoding)


async def test_an_encoded_surrogate_in_an_append_is_a_400_and_nothing_is_stored(
    api: httpx.AsyncClient,
) -> None:
    sid = await new_session(api)
    body = with_raw({"messages": [user("RAW")]}, b"a" + SURROGATE)
    response = await api.post(f"/v1/sessions/{sid}/messages", content=body, headers=JSON)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == "malformed_json"
    assert "not UTF-8 (byte" in problem["detail"]
    assert await stored(api, sid) == []


async def test_an_encoded_surrogate_in_a_model_is_a_400_and_no_model_is_stored(
    api: httpx.AsyncClient,
) -> None:
    body = {
        "context_window_tokens": 1000,
        "max_output_tokens": 100,
        "provider": {"kind": "scripted", "script": [{"text": "RAW"}]},
    }
    response = await api.put(
        "/v1/models/bad-bytes", content=with_raw(body, SURROGATE), headers=JSON
    )
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "malformed_json"
    assert (await api.get("/v1/models/bad-bytes")).status_code == 404


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/tokens/count", {"counter": "estimate", "text": "RAW"}),
        ("/v1/prepare", {"model": "gpt-5", "messages": [user("RAW")]}),
    ],
)
async def test_an_encoded_surrogate_on_the_stateless_endpoints_is_a_400(
    api: httpx.AsyncClient, path: str, body: dict[str, Any]
) -> None:
    response = await api.post(path, content=with_raw(body, b"a" + SURROGATE), headers=JSON)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "malformed_json"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
async def test_a_utf16_or_utf32_append_is_a_400_and_nothing_is_stored(
    api: httpx.AsyncClient, encoding: str
) -> None:
    sid = await new_session(api)
    body = utf16({"messages": [user("RAW")]}, encoding)
    response = await api.post(f"/v1/sessions/{sid}/messages", content=body, headers=JSON)
    assert response.status_code == 400, response.text
    problem = response.json()
    assert problem["code"] == "malformed_json"
    assert "UTF-16" in problem["detail"] or "UTF-32" in problem["detail"]
    assert await stored(api, sid) == []


async def test_a_utf16_session_is_a_400_and_no_session_is_made(api: httpx.AsyncClient) -> None:
    before = await session_ids(api)
    body = utf16(session_body(title="RAW"), "utf-16-le")
    response = await api.post("/v1/sessions", content=body, headers=JSON)
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "malformed_json"
    assert await session_ids(api) == before


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (utf16({"title": "RAW"}, "utf-16-le"), 400, "malformed_json"),
        (utf16({"title": "RAW"}, "utf-16"), 400, "malformed_json"),
        (b'{"title": "a\\u0000b"}', 422, "invalid_request"),
    ],
)
async def test_a_nul_never_reaches_a_title(
    api: httpx.AsyncClient, body: bytes, status: int, code: str
) -> None:
    sid = await new_session(api, title="kept")
    response = await api.patch(f"/v1/sessions/{sid}", content=body, headers=JSON)
    assert response.status_code == status, response.text
    assert response.json()["code"] == code
    assert (await api.get(f"/v1/sessions/{sid}")).json()["title"] == "kept"


async def test_a_session_title_with_a_nul_is_refused(api: httpx.AsyncClient) -> None:
    before = await session_ids(api)
    body = with_raw(session_body(title="RAW"), b"a\\u0000b")
    response = await api.post("/v1/sessions", content=body, headers=JSON)
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "invalid_request"
    assert await session_ids(api) == before


async def test_a_charset_other_than_utf8_is_a_415(api: httpx.AsyncClient) -> None:
    response = await api.post(
        "/v1/tokens/count",
        content=json.dumps({"text": "hi"}).encode("utf-16"),
        headers={"content-type": "application/json; charset=utf-16"},
    )
    assert response.status_code == 415, response.text
    assert response.json()["code"] == "unsupported_media_type"
    assert "utf-16" in response.json()["detail"]


@pytest.mark.parametrize("charset", ["utf-8", "UTF-8", '"utf-8"', "utf8"])
async def test_utf8_by_name_is_taken(api: httpx.AsyncClient, charset: str) -> None:
    response = await api.post(
        "/v1/tokens/count",
        content=json.dumps({"counter": "estimate", "text": "été"}).encode(),
        headers={"content-type": f"application/json; charset={charset}"},
    )
    assert response.status_code == 200, response.text


async def test_utf8_with_a_byte_order_mark_is_still_read(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    body = b"\xef\xbb\xbf" + json.dumps({"messages": [user("été")]}).encode()
    response = await api.post(f"/v1/sessions/{sid}/messages", content=body, headers=JSON)
    assert response.status_code == 201, response.text
    (message,) = await stored(api, sid)
    assert message["content"] == [{"type": "text", "text": "été"}]


@pytest.mark.parametrize("extra", [0, 1])
async def test_an_integer_past_the_digit_limit_is_a_422(api: httpx.AsyncClient, extra: int) -> None:
    digits = sys.get_int_max_str_digits() + extra
    tool = {"name": "read", "description": "Read", "input_schema": {"maximum": "BIG"}}
    body = json.dumps(session_body(agent={"system_prompt": "p", "tools": [tool]}))
    raw = body.replace('"BIG"', "9" * digits).encode()
    before = await session_ids(api)
    response = await api.post("/v1/sessions", content=raw, headers=JSON)
    if not extra:  # the limit itself is a number like any other
        assert response.status_code == 201, response.text
        return
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["code"] == "invalid_request"
    assert f"more than {digits - 1} digits" in problem["detail"]
    assert await session_ids(api) == before


@pytest.mark.parametrize(
    ("body", "found"),
    [
        (b'{"a": "plain"}', None),
        ('{"a": "été 😀"}'.encode(), None),
        (b"\xef\xbb\xbf{}", None),
        (b'{"a": "' + SURROGATE + b'"}', "is not UTF-8 (byte 7)"),
        (b'{"a": "\xc0\xaf"}', "is not UTF-8 (byte 7)"),  # an overlong "/"
        (b'{"a": "\xff"}', "is not UTF-8 (byte 7)"),
        (
            "{}".encode("utf-16-le"),
            "holds a NUL byte (byte 1): it is not UTF-8 (UTF-16 or UTF-32 perhaps)",
        ),
        ("{}".encode("utf-16"), "is UTF-16 (it starts with a UTF-16 byte order mark)"),
        ("{}".encode("utf-32"), "is UTF-32 (it starts with a UTF-32 byte order mark)"),
        (
            "{}".encode("utf-32-be"),
            "holds a NUL byte (byte 0): it is not UTF-8 (UTF-16 or UTF-32 perhaps)",
        ),
    ],
)
def test_not_utf8_names_what_is_wrong(body: bytes, found: str | None) -> None:
    assert not_utf8(body) == found


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *_strings(v)]]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _storable(text: str) -> bool:
    return "\x00" not in text and not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


_TEXT = st.text(st.sampled_from(["a", "é", "\x00", "\ud800", "\udc00", "😀", "\\", '"', "\x1f"]))
_VALUES = st.recursive(
    st.none() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)
_ENCODINGS = ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-be"]


@settings(max_examples=1500, deadline=None)
@given(_VALUES, st.booleans(), st.sampled_from(_ENCODINGS))
def test_what_passes_the_guard_decodes_to_storable_text(
    value: Any, ascii_only: bool, encoding: str
) -> None:
    # Whatever a body's bytes (escaped or raw text, any encoding a reader might guess), a body
    # the guard lets through decodes, by the most lenient reader behind it, to storable text.
    body = json.dumps({"v": value}, ensure_ascii=ascii_only).encode(encoding, "surrogatepass")
    if not_utf8(body) is not None or unstorable_text(body) is not None:
        return
    decoded = json.loads(body)  # guesses UTF-16/32 and lets surrogates pass
    assert all(_storable(text) for text in _strings(decoded))
