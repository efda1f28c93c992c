"""Blank user text is empty, by one rule for appends and turn starts (spec §5
refuses empty user messages and §6 a turn without text): what ``str.strip`` strips, which the
schema states as the same character class."""

from __future__ import annotations

import re
import uuid

import httpx
import pytest

from app.core.content import NOT_BLANK_PATTERN, is_blank
from tests.api.helpers import append, new_session, stored

pytestmark = pytest.mark.anyio

BLANKS = ["", " ", "\t\n\r", "\u3000\u00a0", "\u2028\x1c\x85"]


def text_message(*texts: str) -> dict[str, object]:
    return {"role": "user", "content": [{"type": "text", "text": t} for t in texts]}


async def start(api: httpx.AsyncClient, sid: str, *texts: str) -> httpx.Response:
    body = {
        "client_request_id": uuid.uuid4().hex,
        "input": [{"type": "text", "text": t} for t in texts],
    }
    return await api.post(f"/v1/sessions/{sid}/turns", json=body)


@pytest.mark.parametrize("blank", BLANKS)
async def test_blank_text_is_refused_by_append_and_turn_start_alike(
    api: httpx.AsyncClient, blank: str
) -> None:
    sid = await new_session(api)
    appended = await append(api, sid, text_message(blank, blank))
    assert appended.status_code == 422, appended.text
    assert appended.json()["code"] == "empty_message"
    started = await start(api, sid, blank, blank)
    assert started.status_code == 422, started.text
    assert started.json()["code"] == "empty_input"
    assert await stored(api, sid) == []


async def test_text_with_one_visible_character_is_taken_by_both(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    # U+FEFF is not whitespace to Python (nor to this rule), though ECMA-262's \\s says it is.
    assert (await append(api, sid, text_message(" ", "\ufeff"))).status_code == 201
    started = await start(api, sid, " ", "x ")
    assert started.status_code == 202, started.text


def test_the_schema_pattern_and_the_rule_agree_on_every_character() -> None:
    pattern = re.compile(NOT_BLANK_PATTERN)
    disagree = [
        hex(c) for c in range(0x110000) if (pattern.search(chr(c)) is None) != is_blank(chr(c))
    ]
    assert disagree == []
