"""The bring-your-own-model compaction race against a real server process, on both engines:
a caller fetches the summary request, other clients append while its model
works, then it posts the summary. Whatever the interleaving, every appended message is still in
the next prepared request, after the checkpoint; before the fix the reviewer's reproduction lost
an assistant message."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.core.compaction import SUMMARY_PREAMBLE
from tests.api.helpers import assistant, session_body, user
from tests.servers import ServerProcess, one_server
from tests.services.compaction.builders import VALID

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ROUNDS = 4


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[ServerProcess]:
    with one_server(database_url, tmp_path) as process:
        yield process


def client(server: ServerProcess) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=server.url, timeout=30.0)


async def new_conversation(api: httpx.AsyncClient) -> str:
    created = await api.post("/v1/sessions", json=session_body())
    assert created.status_code == 201, created.text
    sid = str(created.json()["id"])
    appended = await api.post(
        f"/v1/sessions/{sid}/messages",
        json={"messages": [user("Find the bug."), assistant("It is in the cookie code.")]},
    )
    assert appended.status_code == 201, appended.text
    return sid


async def append_one(server: ServerProcess, sid: str, message: dict[str, Any]) -> None:
    async with client(server) as other:
        response = await other.post(f"/v1/sessions/{sid}/messages", json={"messages": [message]})
    assert response.status_code == 201, response.text


async def fetch_request(api: httpx.AsyncClient, sid: str) -> int:
    response = await api.get(f"/v1/sessions/{sid}/compactions/request")
    assert response.status_code == 200, response.text
    return int(response.json()["through_message_sequence"])


async def post_summary(api: httpx.AsyncClient, sid: str, **body: Any) -> httpx.Response:
    return await api.post(
        f"/v1/sessions/{sid}/compactions", json={"summary": VALID, "allow_larger": True, **body}
    )


async def next_request_texts(api: httpx.AsyncClient, sid: str) -> list[str]:
    """The texts of the next request a caller's own model would get (session prepare)."""
    response = await api.post(f"/v1/sessions/{sid}/prepare", json={})
    assert response.status_code == 200, response.text
    return [m["content"][0]["text"] for m in response.json()["request"]["messages"]]


def after_summary(texts: list[str]) -> list[str]:
    """The messages after the checkpoint's summary and reminder (World State included)."""
    return texts[texts.index(SUMMARY_PREAMBLE + VALID) + 2 :]


async def test_fetch_append_post_keeps_the_appended_message(server: ServerProcess) -> None:
    """The reviewer's reproduction, step by step: the assistant message appended while the
    caller's model worked is still sent to the model after the install."""
    async with client(server) as api:
        sid = await new_conversation(api)
        through = await fetch_request(api, sid)
        await append_one(server, sid, assistant("Meanwhile: the cookie is also cached."))

        unnamed = await post_summary(api, sid)
        assert (unnamed.status_code, unnamed.json()["code"]) == (409, "summary_coverage_unknown")
        named = await post_summary(api, sid, through_message_sequence=through)
        assert named.status_code == 201, named.text
        assert named.json()["replaced_through_message_sequence"] == through == 2
        assert after_summary(await next_request_texts(api, sid))[0] == (
            "Meanwhile: the cookie is also cached."
        )


async def test_concurrent_appends_and_post_lose_nothing(server: ServerProcess) -> None:
    async with client(server) as api:
        for round_ in range(ROUNDS):
            sid = await new_conversation(api)
            through = await fetch_request(api, sid)
            appended = [f"round {round_} finding {i}" for i in range(3)]
            results = await asyncio.gather(
                post_summary(api, sid, through_message_sequence=through),
                *(append_one(server, sid, assistant(t)) for t in appended),
            )
            posted = results[0]
            assert posted.status_code == 201, posted.text
            assert posted.json()["through_message_sequence"] == through
            tail = after_summary(await next_request_texts(api, sid))
            # Every appended message once, in the order the store gave them.
            assert sorted(t for t in tail if t in appended) == sorted(appended)


async def test_concurrent_append_and_unnamed_post_lose_nothing(server: ServerProcess) -> None:
    """Without ``through_message_sequence`` the post wins (read before the append) or is refused
    (after it); either way the appended message reaches the model."""
    outcomes: set[int] = set()
    async with client(server) as api:
        for round_ in range(ROUNDS):
            sid = await new_conversation(api)
            await fetch_request(api, sid)
            text = f"round {round_}: late finding"
            posted, _ = await asyncio.gather(
                post_summary(api, sid), append_one(server, sid, assistant(text))
            )
            outcomes.add(posted.status_code)
            texts = await next_request_texts(api, sid)
            if posted.status_code == 201:
                assert text in after_summary(texts)
            else:
                assert posted.json()["code"] == "summary_coverage_unknown", posted.text
                assert text in texts
    assert outcomes <= {201, 409}
