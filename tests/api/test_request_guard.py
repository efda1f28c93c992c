"""Text no store can keep (U+0000, unpaired surrogates) is refused with 422 before anything is
read or written (spec §8), on every endpoint, on SQLite and PostgreSQL alike."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.api.limits import unstorable_text
from tests.api.helpers import new_session, stored, user

pytestmark = pytest.mark.anyio


def raw_message(escaped_text: str) -> bytes:
    """An append body whose user text is written as raw JSON (``escaped_text`` unescaped)."""
    body = json.dumps({"messages": [user("TEXT")]})
    return body.replace('"TEXT"', f'"{escaped_text}"').encode()


async def append_raw(api: httpx.AsyncClient, sid: str, escaped_text: str) -> httpx.Response:
    return await api.post(
        f"/v1/sessions/{sid}/messages",
        content=raw_message(escaped_text),
        headers={"content-type": "application/json"},
    )


@pytest.mark.parametrize(
    ("escaped", "named"),
    [
        ("a\\u0000b", "U+0000"),
        ("\\ud800", "\\ud800"),  # a high surrogate alone
        ("\\uDBFFx", "\\uDBFF"),  # not followed by a low one
        ("\\udc00", "\\udc00"),  # a low surrogate alone
        ("\\ude00\\ud83d", "\\ude00"),  # a pair in the wrong order
        ("\\\\\\u0000", "U+0000"),  # an escaped backslash, then the escape
    ],
)
async def test_unstorable_text_is_refused_and_nothing_is_stored(
    api: httpx.AsyncClient, escaped: str, named: str
) -> None:
    sid = await new_session(api)
    response = await append_raw(api, sid, escaped)
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == "invalid_request"
    assert named in problem["detail"]
    assert await stored(api, sid) == []


@pytest.mark.parametrize(
    ("escaped", "text"),
    [
        ("\\ud83d\\ude00", "\U0001f600"),  # a surrogate pair is one character
        ("\\\\u0000", "\\u0000"),  # an escaped backslash: the text is backslash-u-0-0-0-0
        ("\\u00e9t\\u00e9", "été"),
    ],
)
async def test_text_that_only_looks_unstorable_is_stored(
    api: httpx.AsyncClient, escaped: str, text: str
) -> None:
    sid = await new_session(api)
    response = await append_raw(api, sid, escaped)
    assert response.status_code == 201, response.text
    (message,) = await stored(api, sid)
    assert message["content"] == [{"type": "text", "text": text}]


async def test_a_nul_in_a_turn_start_is_refused_before_the_turn_exists(
    api: httpx.AsyncClient,
) -> None:
    sid = await new_session(api)
    body = b'{"client_request_id": "r\\u0000", "input": [{"type": "text", "text": "go"}]}'
    response = await api.post(
        f"/v1/sessions/{sid}/turns", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 422, response.text
    turns = await api.get(f"/v1/sessions/{sid}/turns/r")
    assert turns.status_code == 404


@pytest.mark.parametrize(
    "target",
    ["/v1/sessions/ses-a%00b", "/v1/sessions/ses-a/turns/t%00", "/v1/models?after=%00"],
)
async def test_a_nul_in_the_path_or_query_is_refused(api: httpx.AsyncClient, target: str) -> None:
    response = await api.get(target)
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "invalid_request"


async def test_the_stateless_endpoints_refuse_it_too(api: httpx.AsyncClient) -> None:
    response = await api.post(
        "/v1/tokens/count",
        content=b'{"counter": "estimate", "text": "\\ud800"}',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422, response.text
    assert response.json()["code"] == "invalid_request"


@pytest.mark.parametrize(
    ("body", "found"),
    [
        (b'{"a": "plain"}', None),
        (b'{"a": "\\u0041"}', None),
        (b'{"a": "\\u0000"}', "U+0000 (NUL)"),
        (b'{"a": "\\\\u0000"}', None),
        (b'{"a": "\\\\\\u0000"}', "U+0000 (NUL)"),
        (b'{"a": "\\uD83D\\uDE00"}', None),
        (b'{"a": "\\uD83D"}', "an unpaired UTF-16 surrogate (\\uD83D)"),
        (b'{"a": "\\uD83D\\u0041"}', "an unpaired UTF-16 surrogate (\\uD83D)"),
        (b'{"a": "\\uDE00"}', "an unpaired UTF-16 surrogate (\\uDE00)"),
        (b'{"a": "\\uD7FF\\uE000"}', None),  # the neighbours of the surrogate range
    ],
)
def test_unstorable_text_reads_escapes_exactly(body: bytes, found: Any) -> None:
    assert unstorable_text(body) == found


# The scan before it was made linear (a pattern starting with the backslash run, tried at
# every position): the reference the fast scan must agree with on every body.
_REFERENCE = re.compile(
    rb"(?<!\\)(?:\\\\)*\\u(0000|d[89ab][0-9a-f]{2}(?:\\ud[c-f][0-9a-f]{2})?|d[c-f][0-9a-f]{2})",
    re.IGNORECASE,
)


def _reference_scan(body: bytes) -> str | None:
    for match in _REFERENCE.finditer(body):
        escape = match.group(1)
        if escape == b"0000":
            return "U+0000 (NUL)"
        if len(escape) != len(b"d800\\udc00"):
            return f"an unpaired UTF-16 surrogate (\\u{escape.decode()})"
    return None


# Runs of backslashes, ``u``/``U`` and the hex digits that make (or nearly make) the escapes.
_PIECES = st.sampled_from(
    [b"\\", b"\\\\", b"u", b"U", b"0000", b"d8", b"D8", b"dc", b"DE", b"00", b"0041", b"x", b'"']
)


@settings(max_examples=2000, deadline=None)
@given(st.lists(_PIECES, max_size=24).map(b"".join))
def test_the_scan_agrees_with_the_reference_on_any_bytes(body: bytes) -> None:
    assert unstorable_text(body) == _reference_scan(body)
