"""Pins reach the model verbatim in every request, as the World State section ``session/pins``:
appended (never rewriting what was sent) when they change, counted in the budget, and sent again
in full after a compaction, a bring-your-own summary and a rewind — over HTTP, on a real
provider protocol for turns."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.api.helpers import (
    append,
    assistant,
    fake_provider_model,
    new_session,
    prepare_session,
    provenance_without_tokens,
    run_turn,
    user,
)
from tests.core.compaction.summaries import summary
from tests.providers.fakes import FakeProviderServer, StreamReply, openai_stream

pytestmark = pytest.mark.anyio

PREAMBLE = (
    "The user or the application pinned these items on this session. Each holds until it is "
    "removed: after any compaction, and over anything a summary or an earlier message says."
)
PINNED = (
    '<pinned_context format_version="1">\n'
    f"{PREAMBLE}\n"
    "## Constraints\n"
    "- Never modify the prod database.\n"
    "## Facts\n"
    "- The incident is INC-42.\n"
    "  It started at 09:12 UTC.\n"
    "</pinned_context>"
)
REPLACED = "The pinned items below replace all previously pinned items."
REMOVED = "The previously pinned items no longer apply; nothing is pinned now."


async def pin(api: httpx.AsyncClient, sid: str, text: str, kind: str = "constraint") -> str:
    response = await api.post(f"/v1/sessions/{sid}/pins", json={"kind": kind, "text": text})
    assert response.status_code == 201, response.text
    return str(response.json()["pin_id"])


def texts(request: dict[str, Any]) -> list[str]:
    """The text of each message of a prepared request, its blocks joined."""
    return [
        "".join(b.get("text", "") for b in message["content"]) for message in request["messages"]
    ]


def pinned_messages(request: dict[str, Any]) -> list[str]:
    return [t for t in texts(request) if "<pinned_context" in t or t == REMOVED]


async def prepared(api: httpx.AsyncClient, sid: str) -> dict[str, Any]:
    response = await prepare_session(api, sid)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_pins_are_sent_verbatim_and_a_change_is_appended(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    await append(api, sid, user("What broke?"), assistant("Looking."))
    constraint = await pin(api, sid, "Never modify the prod database.")
    await pin(api, sid, "The incident is INC-42.\nIt started at 09:12 UTC.", kind="fact")

    first = await prepared(api, sid)
    assert pinned_messages(first["request"]) == [PINNED]
    # Counted in the budget: a stored message of its own, with its share of the Conversation.
    index = texts(first["request"]).index(PINNED) - 1  # after the one system message
    assert provenance_without_tokens(first)[index]["type"] == "persisted"
    counted = await api.post(
        "/v1/tokens/count", json={"content": [{"type": "text", "text": PINNED}]}
    )
    # Its share of the region, which rounds once: its own measure, give or take that rounding.
    assert abs(first["provenance"][index]["tokens"] - counted.json()["tokens"]) <= 1

    unchanged = await prepared(api, sid)
    assert unchanged["request"] == first["request"]
    assert unchanged["budget"]["prefix_break"] is None

    await api.put(
        f"/v1/sessions/{sid}/pins/{constraint}",
        json={"kind": "constraint", "text": "Only read from the prod database."},
    )
    changed = await prepared(api, sid)
    before = first["request"]["messages"]
    assert changed["request"]["messages"][: len(before)] == before  # nothing sent is rewritten
    assert changed["budget"]["prefix_break"] is None
    assert changed["budget"]["stable_prefix_tokens"] == first["budget"]["estimated_input_tokens"]
    (notice,) = texts(changed["request"])[len(before) :]
    assert notice == f"{REPLACED}\n\n" + PINNED.replace(
        "Never modify the prod database.", "Only read from the prod database."
    )

    for listed in (await api.get(f"/v1/sessions/{sid}/pins")).json()["pins"]:
        assert (await api.delete(f"/v1/sessions/{sid}/pins/{listed['pin_id']}")).status_code == 204
    emptied = await prepared(api, sid)
    assert texts(emptied["request"])[-1] == REMOVED
    assert len(emptied["request"]["messages"]) == len(changed["request"]["messages"]) + 1
    # Nothing pinned and nothing more to say: the next request adds nothing.
    assert (await prepared(api, sid))["request"] == emptied["request"]


async def test_a_session_without_pins_gets_no_pins_section(api: httpx.AsyncClient) -> None:
    sid = await new_session(api)
    await append(api, sid, user("Hello"))
    assert pinned_messages((await prepared(api, sid))["request"]) == []


async def test_pins_survive_compaction_a_byo_summary_and_rewind(api: httpx.AsyncClient) -> None:
    sid = await new_session(api, summary_model_id="local")
    await pin(api, sid, "Never modify the prod database.")
    await pin(api, sid, "The incident is INC-42.\nIt started at 09:12 UTC.", kind="fact")
    await append(api, sid, user("Find the cause of INC-42."), assistant("Reading the logs."))
    assert pinned_messages((await prepared(api, sid))["request"]) == [PINNED]

    # The summary request never carries them (spec §4: no World State in a summary request).
    request = (await api.get(f"/v1/sessions/{sid}/compactions/request")).json()
    assert pinned_messages(request["request"]) == []

    manual = await api.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True})
    assert manual.status_code == 201, manual.text
    after = await prepared(api, sid)
    kinds = [p.get("reason") for p in provenance_without_tokens(after)]
    assert kinds[:3] == ["last_user_request_replay", "compaction_summary", "system_reminder"]
    # Sent again in full, with no notice: the earlier one was compacted away.
    assert pinned_messages(after["request"]) == [PINNED]

    # A summary written by the caller's own model that never mentions the pins.
    await append(api, sid, user("Any news?"), assistant("Still reading."))
    served = (await api.get(f"/v1/sessions/{sid}/compactions/request")).json()
    assert pinned_messages(served["request"]) == []
    byo = await api.post(
        f"/v1/sessions/{sid}/compactions",
        json={
            "summary": summary(),
            "model": "own-model",
            "through_message_sequence": served["through_message_sequence"],
            # It drops the user's red line, which the pin keeps: the caller says so.
            "accept_dropped_user_facts": True,
            "allow_larger": True,
        },
    )
    assert byo.status_code == 201, byo.text
    assert "prod database" not in byo.json()["summary"]
    assert pinned_messages((await prepared(api, sid))["request"]) == [PINNED]

    rewound = await api.post(
        f"/v1/sessions/{sid}/rewind", json={"compaction_id": manual.json()["compaction_id"]}
    )
    assert rewound.status_code == 201, rewound.text
    assert pinned_messages((await prepared(api, sid))["request"]) == [PINNED]


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviderServer]:
    monkeypatch.setenv("CTXSVC_TEST_FAKE_KEY", "sk-test")
    with FakeProviderServer() as server:
        yield server


async def test_a_turn_sends_pins_to_the_model_before_and_after_an_in_turn_compaction(
    api: httpx.AsyncClient, provider: FakeProviderServer
) -> None:
    # 4 000-token window, 500 reserved for the answer: a request compacts from 2 475 tokens.
    model_id = await fake_provider_model(
        api, provider.base_url, context_window_tokens=4000, max_output_tokens=500
    )
    sid = await new_session(api, model_id=model_id, summary_model_id="local")
    await pin(api, sid, "Never modify the prod database.")
    await pin(api, sid, "The incident is INC-42.\nIt started at 09:12 UTC.", kind="fact")
    provider.enqueue(
        StreamReply(openai_stream(text=["Reading."])), StreamReply(openai_stream(text=["Done."]))
    )

    first = await run_turn(api, sid, "Find the cause of INC-42.")
    assert first["status"] == "completed", first["outcome"]
    sent = provider.requests[0].json()
    assert sent["max_completion_tokens"] == 500
    assert [m["content"] for m in sent["messages"] if "<pinned_context" in str(m["content"])] == [
        PINNED
    ]

    history = [user(f"log {n}: " + "line " * 400) for n in range(6)]
    assert (await append(api, sid, *history)).status_code == 201
    second = await run_turn(api, sid, "And now?")
    assert second["status"] == "completed", second["outcome"]
    checkpoints = (await api.get(f"/v1/sessions/{sid}/compactions")).json()["compactions"]
    assert [c["kind"] for c in checkpoints] == ["threshold"]
    after = provider.requests[1].json()["messages"]
    contents = [str(m["content"]) for m in after]
    summary_at = next(i for i, c in enumerate(contents) if "continuation summary" in c)
    (pinned_at,) = [i for i, c in enumerate(contents) if c == PINNED]
    assert pinned_at > summary_at
