"""``budget.stable_prefix_tokens`` and ``budget.prefix_break`` through the API, on both engines:
session prepare, inspection and a turn's model calls are measured against the session's previous
request (stored); the stateless prepare against the ``request_digest`` its caller passes back."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from sqlalchemy import update

from app.storage.database import unit_of_work
from app.storage.models import SessionRequestPrefix
from tests.api.helpers import (
    append,
    new_session,
    prepare_session,
    run_turn,
    scripted_model,
    user,
)
from tests.api.test_turns import call as tool_call
from tests.api.test_turns import ok, post_results, session_with
from tests.observability.conftest import Served, serve

pytestmark = pytest.mark.anyio

BIG = "r" * 9_000  # a tool result over the pruning threshold (8 192 characters)


def exchange(i: int, output: str = "ok") -> list[dict[str, Any]]:
    return [
        user(f"request {i}"),
        {
            "role": "assistant",
            "content": [{"type": "tool_call", "id": f"c{i}", "name": "read", "input": "{}"}],
        },
        {
            "role": "tool",
            "content": [
                {
                    "type": "tool_result",
                    "id": f"c{i}",
                    "name": "read",
                    "output": [{"type": "text", "text": output}],
                    "state": "success",
                }
            ],
        },
    ]


async def prepared(api: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    response = await prepare_session(api, sid)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def inspected(api: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    response = await api.get(f"/v1/sessions/{sid}/context")
    assert response.status_code == 200, response.text
    return dict(response.json())


def prefix_of(answer: dict[str, Any]) -> tuple[int, dict[str, Any] | None]:
    budget = answer["budget"]
    return budget["stable_prefix_tokens"], budget["prefix_break"]


def tokens_before(answer: dict[str, Any], index: int) -> int:
    """Tokens of the tools and the request's messages before ``index``, from the answer's own
    figures (the Conversation's by provenance shares)."""
    budget = answer["budget"]
    systems = len(answer["request"]["messages"]) - len(answer["provenance"])
    shares = [entry["tokens"] for entry in answer["provenance"]][: index - systems]
    return int(budget["tool_surface_tokens"] + budget["system_context_tokens"] + sum(shares))


async def test_appending_extends_the_previous_prepare_and_inspection_writes_nothing(
    api: httpx.AsyncClient,
) -> None:
    sid = await new_session(api)
    await append(api, sid, *exchange(1))
    first = await prepared(api, sid)
    assert prefix_of(first) == (0, None)  # no previous request
    assert first["request_digest"].startswith("pc1.")
    # Inspection right after: the very request, all of it stable.
    assert prefix_of(await inspected(api, sid)) == (first["budget"]["estimated_input_tokens"], None)
    await append(api, sid, *exchange(2))
    # Inspection measures against the prepared request and does not replace it...
    look = await inspected(api, sid)
    assert prefix_of(look) == (first["budget"]["estimated_input_tokens"], None)
    # ...so the next prepare is measured against the first prepare, not the inspection.
    second = await prepared(api, sid)
    assert prefix_of(second) == (first["budget"]["estimated_input_tokens"], None)
    assert second["budget"]["estimated_input_tokens"] > first["budget"]["estimated_input_tokens"]


async def test_a_rewind_breaks_as_a_changed_history(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    await append(api, sid, *exchange(1))
    first = (await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})).json()
    await append(api, sid, *exchange(2))
    compacted = (
        await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    ).json()
    assert compacted["kind"] == "manual"
    after_compaction = await prepared(api, sid)
    # Measured against nothing yet; the next ones are measured against it.
    assert prefix_of(after_compaction) == (0, None)
    await append(api, sid, user("abandoned"))
    rewound = await api.post(
        f"/v1/sessions/{sid}/rewind", json={"compaction_id": first["compaction_id"]}
    )
    assert rewound.status_code == 201, rewound.text
    answer = await prepared(api, sid)
    tokens, broken = prefix_of(answer)
    assert broken is not None
    assert broken["reason"] == "history_changed"
    assert tokens == tokens_before(answer, broken["index"])


async def test_a_compaction_breaks_at_its_items(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    await append(api, sid, *exchange(1), *exchange(2))
    before = await prepared(api, sid)
    response = await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    assert response.status_code == 201, response.text
    answer = await prepared(api, sid)
    tokens, broken = prefix_of(answer)
    assert broken == {"index": 1, "reason": "compaction"}  # after the one system message
    assert tokens == tokens_before(answer, 1)
    assert tokens < before["budget"]["estimated_input_tokens"]
    # The request after it extends it again.
    await append(api, sid, user("next"))
    assert prefix_of(await prepared(api, sid)) == (answer["budget"]["estimated_input_tokens"], None)


async def test_a_world_state_change_is_appended_and_keeps_the_prefix(
    api: httpx.AsyncClient,
) -> None:
    sid = await new_session(api)
    await append(api, sid, *exchange(1))
    first = await prepared(api, sid)
    patched = await api.patch(f"/v1/sessions/{sid}", json={"sandbox": {"mode": "accept_edits"}})
    assert patched.status_code == 200, patched.text
    second = await prepared(api, sid)
    (notice,) = second["world_state_message_ids"]  # the replacement notice, sampled now
    assert prefix_of(second) == (first["budget"]["estimated_input_tokens"], None)
    last = second["provenance"][-1]
    assert last["message_id"] == notice


async def pruning_session(api: httpx.AsyncClient) -> str:
    # Effective input 5 500, trigger line 4 675 (with the 500 reserved for the output): the big
    # result fits, with the second exchange's it does not.
    model_id = await scripted_model(
        api, [{"text": "unused"}], context_window_tokens=6000, max_output_tokens=500
    )
    return await new_session(api, model_id=model_id, summary_model_id="local")


async def test_pruning_breaks_at_the_first_pruned_result(api: httpx.AsyncClient) -> None:
    sid = await pruning_session(api)
    await append(api, sid, *exchange(1, BIG), user("thanks"))
    before = await prepared(api, sid)
    assert before["projection"]["pruned_tool_results"] == 0
    assert not before["budget"]["reaches_auto_compact_limit"]
    await append(api, sid, {"role": "assistant", "content": [{"type": "text", "text": "ok"}]})
    await append(api, sid, *exchange(2, "s" * 8_000))  # now over the line: pruning runs
    answer = await prepared(api, sid)
    assert answer["projection"]["pruned_tool_results"] == 1
    tokens, broken = prefix_of(answer)
    assert broken == {"index": 3, "reason": "pruning"}  # system, user, assistant, the result
    assert tokens == tokens_before(answer, 3)


async def test_a_stored_record_that_does_not_decode_is_no_previous_request(
    api: httpx.AsyncClient,
) -> None:
    sid = await new_session(api)
    await append(api, sid, *exchange(1))
    await prepared(api, sid)
    container = api._transport.app.state.container  # type: ignore[attr-defined]
    for corrupt in (b"", b"\x07garbage", b"\x01" * 40):
        async with unit_of_work(container.db) as db:
            await db.execute(
                update(SessionRequestPrefix)
                .where(SessionRequestPrefix.session_id == sid)
                .values(record=corrupt)
            )
        assert prefix_of(await inspected(api, sid)) == (0, None)
        answer = await prepared(api, sid)  # and it replaces the row with a good one
        assert prefix_of(answer) == (0, None)
        assert prefix_of(await inspected(api, sid))[1] is None


# ----- the stateless prepare ------------------------------------------------------------------

MODEL = {"context_window_tokens": 100_000, "max_output_tokens": 1000}
SYSTEM = [{"key": "core/agent-system", "content": [{"type": "text", "text": "You are careful."}]}]


async def stateless(api: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await api.post("/v1/prepare", json={"model": MODEL, "system_context": SYSTEM, **body})


async def test_the_stateless_digest_round_trips_and_agrees_with_a_session(
    api: httpx.AsyncClient,
) -> None:
    conversation = [*exchange(1), *exchange(2)]
    first = (await stateless(api, conversation=conversation[:3])).json()
    assert prefix_of(first) == (0, None)
    second = (
        await stateless(
            api, conversation=conversation, previous_request_digest=first["request_digest"]
        )
    ).json()
    assert prefix_of(second) == (first["budget"]["estimated_input_tokens"], None)
    # A rewritten message: the break names it.
    changed = [*conversation[:3], user("request 2, reworded"), *conversation[4:]]
    third = (
        await stateless(api, conversation=changed, previous_request_digest=second["request_digest"])
    ).json()
    assert prefix_of(third) == (tokens_before(third, 4), {"index": 4, "reason": "history_changed"})
    # The same two requests through a session: the stateless twin of each session prepare
    # (its very request, as a caller without a session would send it) reports the same.
    sid = await new_session(api, agent={"system_prompt": "You are careful."})
    await append(api, sid, *conversation[:3])
    session_first = await prepared(api, sid)
    await append(api, sid, *conversation[3:])
    session_second = await prepared(api, sid)
    previous = None
    for answer in (session_first, session_second):
        request = answer["request"]
        body: dict[str, Any] = {
            "model_id": "local",
            "system_context": SYSTEM,
            "tools": request["tools"],
            "conversation": request["messages"][1:],
        }
        if previous is not None:
            body["previous_request_digest"] = previous
        twin = (await api.post("/v1/prepare", json=body)).json()
        assert twin["request"] == request
        assert prefix_of(twin) == prefix_of(answer)
        previous = twin["request_digest"]
    assert prefix_of(session_second)[0] == session_first["budget"]["estimated_input_tokens"]


@pytest.mark.parametrize(
    "digest", ["", "pc1.", "pc1.AAAA", "pc9.AQAAAAAAAAA", "not a digest", "pc1.!!!!", "x" * 5000]
)
async def test_a_malformed_previous_digest_is_refused_with_its_code(
    api: httpx.AsyncClient, digest: str
) -> None:
    response = await stateless(api, conversation=exchange(1), previous_request_digest=digest)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["code"] == "invalid_request_digest"
    assert problem["field"] == "previous_request_digest"


async def test_an_overlong_previous_digest_is_refused_by_the_schema(
    api: httpx.AsyncClient,
) -> None:
    from app.core.caching.prefix_record import MAX_DIGEST_CHARS

    response = await stateless(
        api, conversation=exchange(1), previous_request_digest="pc1." + "A" * MAX_DIGEST_CHARS
    )
    assert response.status_code in (413, 422), response.text


# ----- a turn's model calls -------------------------------------------------------------------


@pytest.fixture
async def traced(database_url: str) -> AsyncIterator[Served]:
    async for served in serve(database_url, traced=True):
        yield served


def turn_prepares(spans: list[ReadableSpan]) -> list[dict[str, Any]]:
    found = [
        dict(s.attributes or {})
        for s in spans
        if s.name == "prepare" and (s.attributes or {}).get("ctxsvc.prepare.kind") == "turn"
    ]
    return sorted(found, key=lambda a: int(a["ctxsvc.budget.estimated_input_tokens"]))


async def test_a_tool_round_trip_the_second_call_covers_the_first(traced: Served) -> None:
    api = traced.api
    sid = await session_with(
        api, [{"tool_calls": [tool_call("read", path="a.py")]}, {"text": "ok"}]
    )
    await append(api, sid, *exchange(1))
    before = await prepared(api, sid)  # the previous request of the session
    turn = await run_turn(api, sid, "read a.py")
    (pending,) = turn["pending_tool_calls"]
    # Waiting: the first call's record is stored; inspection shows its request as the prefix.
    waiting = await inspected(api, sid)
    done = await post_results(api, sid, turn["turn_id"], ok(pending["tool_call_id"]), wait=True)
    assert done.json()["status"] == "completed", done.text
    first, second = turn_prepares(traced.spans())
    # The first call extends the session prepare before it, the second (another runner: it
    # read the record from the database) the first call's request.
    assert first["ctxsvc.budget.stable_prefix_tokens"] == before["budget"]["estimated_input_tokens"]
    assert "ctxsvc.budget.prefix_break.reason" not in first
    assert (
        second["ctxsvc.budget.stable_prefix_tokens"]
        == first["ctxsvc.budget.estimated_input_tokens"]
    )
    assert "ctxsvc.budget.prefix_break.reason" not in second
    assert waiting["budget"]["prefix_break"] is None
    assert (
        waiting["budget"]["stable_prefix_tokens"] == first["ctxsvc.budget.estimated_input_tokens"]
    )
    # After the turn, inspection is measured against the second call's request.
    after = await inspected(api, sid)
    assert prefix_of(after) == (second["ctxsvc.budget.estimated_input_tokens"], None)
