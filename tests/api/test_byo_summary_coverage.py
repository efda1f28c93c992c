"""A summary written by a caller's own model is installed over what its request covered, on
both engines: messages appended while the model worked stay in the active
conversation after the checkpoint; a post that does not say what it covers is accepted only when
nothing was appended since the last request served, and refused with a 409 otherwise."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.core.compaction import SUMMARY_PREAMBLE
from tests.api.helpers import append, assistant, new_session, stored, user
from tests.services.compaction.builders import VALID

pytestmark = pytest.mark.anyio

BIGINT_MAX = 2**63 - 1


async def four_messages(api: httpx.AsyncClient) -> str:
    sid = await new_session(api)
    response = await append(
        api,
        sid,
        user("Fix the flaky login test."),
        assistant("It races on the session cookie."),
        user("Then make the cookie write atomic."),
        assistant("Done: the write now happens under the lock."),
    )
    assert response.status_code == 201, response.text
    return sid


async def summary_request(api: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    response = await api.get(f"/v1/sessions/{sid}/compactions/request")
    assert response.status_code == 200, response.text
    return dict(response.json())


async def post_summary(api: httpx.AsyncClient, sid: str, **body: Any) -> httpx.Response:
    return await api.post(
        f"/v1/sessions/{sid}/compactions", json={"summary": VALID, "allow_larger": True, **body}
    )


async def checkpoints(api: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    return list((await api.get(f"/v1/sessions/{sid}/compactions")).json()["compactions"])


def texts(request: dict[str, Any]) -> list[str]:
    return [m["content"][0]["text"] for m in request["messages"]]


async def test_messages_appended_meanwhile_stay_after_the_checkpoint(
    api: httpx.AsyncClient,
) -> None:
    sid = await four_messages(api)
    request = await summary_request(api, sid)
    assert request["through_message_sequence"] == 4
    # While the caller's model writes the summary, the conversation goes on.
    later = await append(api, sid, user("Also add a regression test."), assistant("Added it."))
    assert [m["sequence"] for m in later.json()["messages"]] == [5, 6]

    response = await post_summary(api, sid, through_message_sequence=4)
    assert response.status_code == 201, response.text
    checkpoint = response.json()
    assert checkpoint["through_message_sequence"] == 4
    assert checkpoint["replaced_through_message_sequence"] == 4
    assert checkpoint["source_message_count"] == 4

    # The next prepared request: replay, summary, reminder, then the two newer messages.
    prepared = await api.post(f"/v1/sessions/{sid}/prepare", json={})
    assert prepared.status_code == 200, prepared.text
    sent = texts(prepared.json()["request"])
    assert sent[1] == "Then make the cookie write atomic."  # the replayed last user request
    assert sent[2] == SUMMARY_PREAMBLE + VALID
    assert sent[4:6] == ["Also add a regression test.", "Added it."]
    provenance = prepared.json()["provenance"]
    ids = [m["message_id"] for m in later.json()["messages"]]
    assert [p.get("message_id") for p in provenance[3:5]] == ids


async def test_without_coverage_it_is_the_last_request_when_nothing_was_appended(
    api: httpx.AsyncClient,
) -> None:
    sid = await four_messages(api)
    await summary_request(api, sid)
    response = await post_summary(api, sid)
    assert response.status_code == 201, response.text
    assert response.json()["through_message_sequence"] == 4
    # The same answer again would install over the checkpoint it just made.
    again = await post_summary(api, sid)
    assert (again.status_code, again.json()["code"]) == (409, "compaction_conflict")
    assert len(await checkpoints(api, sid)) == 1


async def test_without_coverage_after_an_append_it_is_refused_and_nothing_changes(
    api: httpx.AsyncClient,
) -> None:
    sid = await four_messages(api)
    await summary_request(api, sid)
    await append(api, sid, assistant("One more finding."))
    before = await stored(api, sid)

    response = await post_summary(api, sid)
    assert response.status_code == 409, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == "summary_coverage_unknown"
    assert (problem["served_through_message_sequence"], problem["through_message_sequence"]) == (
        4,
        5,
    )
    assert "messages 5 to 5 were appended" in problem["detail"]
    assert await checkpoints(api, sid) == []
    assert await stored(api, sid) == before
    # Saying what it covers is the way out.
    assert (await post_summary(api, sid, through_message_sequence=4)).status_code == 201


async def test_without_coverage_and_without_a_request_served_it_is_refused(
    api: httpx.AsyncClient,
) -> None:
    sid = await four_messages(api)
    response = await post_summary(api, sid)
    assert (response.status_code, response.json()["code"]) == (409, "summary_coverage_unknown")
    assert "no summary request was served" in response.json()["detail"]
    assert await checkpoints(api, sid) == []


async def test_a_checkpoint_installed_since_the_request_refuses_its_summary(
    api: httpx.AsyncClient,
) -> None:
    sid = await four_messages(api)
    await summary_request(api, sid)
    # Another compaction (the service's own summary model) lands first, over the same messages.
    assert (
        await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    ).status_code == 201
    for body in ({}, {"through_message_sequence": 4}):
        response = await post_summary(api, sid, **body)
        assert (response.status_code, response.json()["code"]) == (409, "compaction_conflict")
    # A checkpoint that covers more than the summary: refused whatever request it answers.
    await append(api, sid, user("And now?"))
    await summary_request(api, sid)
    assert (
        await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    ).status_code == 201
    older = await post_summary(api, sid, through_message_sequence=4)
    assert (older.status_code, older.json()["code"]) == (409, "compaction_conflict")
    assert len(await checkpoints(api, sid)) == 2


async def test_a_rewind_since_the_request_refuses_its_summary(api: httpx.AsyncClient) -> None:
    sid = await four_messages(api)
    await summary_request(api, sid)
    first = await post_summary(api, sid)
    assert first.status_code == 201, first.text
    await summary_request(api, sid)  # built on the checkpoint just installed
    rewound = await api.post(
        f"/v1/sessions/{sid}/rewind", json={"compaction_id": first.json()["compaction_id"]}
    )
    assert rewound.status_code == 201, rewound.text
    response = await post_summary(api, sid)
    assert (response.status_code, response.json()["code"]) == (409, "compaction_conflict")


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({"through_message_sequence": 5}, 422, "coverage_out_of_range"),  # past the last message
        ({"through_message_sequence": 0}, 422, "invalid_request"),
        ({"through_message_sequence": BIGINT_MAX + 1}, 422, "invalid_request"),
        (
            {"through_message_sequence": 4, "expected_through_message_sequence": 3},
            422,
            "coverage_mismatch",
        ),
        ({"through_message_sequence": 3, "expected_through_message_sequence": 3}, 409, None),
    ],
)
async def test_coverage_that_cannot_be_is_refused(
    api: httpx.AsyncClient, body: dict[str, Any], status: int, code: str | None
) -> None:
    sid = await four_messages(api)
    await summary_request(api, sid)
    response = await post_summary(api, sid, **body)
    assert response.status_code == status, response.text
    if code is not None:
        assert response.json()["code"] == code
    assert await checkpoints(api, sid) == []


async def test_the_last_message_is_a_coverage_boundary_too(api: httpx.AsyncClient) -> None:
    sid = await four_messages(api)
    response = await post_summary(api, sid, through_message_sequence=4)  # equal to the last
    assert response.status_code == 201, response.text
    assert response.json()["replaced_through_message_sequence"] == 4


async def test_coverage_is_for_posted_summaries_only(api: httpx.AsyncClient) -> None:
    sid = await four_messages(api)
    response = await api.post(
        f"/v1/sessions/{sid}/compactions", json={"through_message_sequence": 4}
    )
    assert (response.status_code, response.json()["code"]) == (422, "invalid_request")
    assert await checkpoints(api, sid) == []
