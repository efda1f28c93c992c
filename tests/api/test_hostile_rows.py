"""No stored row can break a read of its session.

The store is append-only: a row once accepted stays forever, so every reader of stored content
must be total. These tests store the most hostile rows the append rules let through — as rows
stored before any input limit existed could look: tool-call arguments nested 100 000 levels
deep, broken or non-finite or over the nesting cap; provider-opaque payloads and artifacts nested
as deep as the JSON codec of the time could write, huge, or of odd types; artifacts compaction
cannot decode; unusual Unicode — through the repository, under its append rules but past the
API's schema. Then every reader runs over them on a real server (a real HTTP stack is deeper
than the ASGI test transport, which is where recursion limits bit): raw messages, inspection in
each encoding, session prepare, turns on OpenAI and Anthropic protocol models over loopback
fakes, a turn that compacts them first, events, compaction (local and bring-your-own), rewind,
replay, transcript and the model's history tool.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from app.api.schemas.content import MessageIn, blocks_to_core
from app.core.content import Block
from app.core.jsontext import MAX_ARGUMENT_DEPTH, dumps, loads
from app.core.limits.json_values import json_text_problem
from app.main import create_app
from app.storage.database import create_engine, create_session_factory, unit_of_work
from app.storage.migrate import upgrade_to_head
from app.storage.repositories.messages import MessageRepository
from app.storage.repositories.records import NewMessage
from app.storage.repositories.sessions import SessionRepository
from tests.api.helpers import fake_provider_model, new_session, run_turn
from tests.conftest import BACKENDS, make_settings, throwaway_postgres_database
from tests.multiprocess.servers import read_events, serve_in_process
from tests.providers.fakes import (
    FakeProviderServer,
    StreamReply,
    anthropic_stream,
    openai_stream,
)
from tests.services.compaction.builders import VALID

pytestmark = pytest.mark.anyio

KEY_ENV = "CTXSVC_TEST_HOSTILE_KEY"
# As deep as ``json`` could write from a shallow stack before any nesting limit existed.
OLD_CODEC_DEPTH = 990
MEGABYTE = 1_000_000

ODD_TEXT = (
    "e\u0301 \u202eRTL override\u202c 👩‍👩‍👧‍👦 \ufeffBOM \uffff\ufffe noncharacters "
    "\u2028line\u2029para \r\n\t tab \u00a0nbsp \U0010fffd plane 16 𝔘𝔫𝔦𝔠𝔬𝔡𝔢"
)


def nested(depth: int, leaf: Any = "leaf") -> Any:
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def brackets(depth: int) -> str:
    return "[" * depth + "]" * depth


AT_CAP = {"a": nested(MAX_ARGUMENT_DEPTH - 1)}

# Tool-call arguments a model (or a caller) could have stored, and what the Anthropic encoding
# must send as ``tool_use.input`` for each: the object when it is usable JSON, else ``{}``.
ARGUMENTS: dict[str, tuple[str, Any]] = {
    "call_deep": (brackets(100_000), {}),
    "call_broken": ('{"path": "a', {}),
    "call_nan": ('{"path": NaN}', {}),
    "call_overflow": ('{"n": 1e999}', {}),
    "call_list": ("[1, 2]", {}),
    # An object nesting exactly as deep as arguments may, and one level more.
    "call_at_cap": (json.dumps(AT_CAP), AT_CAP),
    "call_over_cap": (json.dumps({"a": AT_CAP}), {}),
    "call_huge": (json.dumps({"text": "x" * MEGABYTE}), {"text": "x" * MEGABYTE}),
    "call_empty": ("", {}),
    # A plan the turn refused, answered "success" by hand: no compaction may take it as the plan.
    "plan_deep": (brackets(100_000), {}),
}


def tool_of(call_id: str) -> str:
    return "update_plan" if call_id.startswith("plan_") else "read"


DEEP_TOOL = {
    "name": "deep",
    "description": ODD_TEXT,
    "input_schema": nested(OLD_CODEC_DEPTH, leaf={"type": "object"}),
}


def hostile_messages() -> list[NewMessage]:
    calls: list[Block] = [
        {"type": "tool_call", "id": call_id, "name": tool_of(call_id), "input": raw}
        for call_id, (raw, _) in ARGUMENTS.items()
    ]
    assistant: list[Block] = [
        {"type": "thinking", "thinking": ""},
        {"type": "text", "text": ""},
        {
            "type": "provider_opaque",
            "driver": "anthropic",
            "kind": "thinking",
            "payload": {"signature": nested(OLD_CODEC_DEPTH), "thinking": 5},
        },
        {
            "type": "provider_opaque",
            "driver": "anthropic",
            "kind": "redacted_thinking",
            "payload": nested(OLD_CODEC_DEPTH),
        },
        {"type": "provider_opaque", "driver": "elsewhere", "kind": "?", "payload": 10**300},
        {"type": "provider_opaque", "driver": "", "kind": "", "payload": "p" * MEGABYTE},
        {"type": "provider_opaque", "driver": "anthropic", "kind": "thinking", "payload": None},
        *calls,
    ]
    odd_artifacts = [
        {"kind": "file_change", "payload": {"path": 5}},
        {"kind": "file_change", "payload": "src/a.py"},
        {"kind": "file_change", "payload": {"path": "a.py", "undone": "yes"}},
        {"kind": "file_change", "payload": {"path": "é/" + "p" * 5000}},
        {"kind": "elsewhere", "payload": nested(OLD_CODEC_DEPTH)},
        {"kind": "file_change"},
    ]
    results: list[NewMessage] = []
    outputs: list[list[Any]] = [
        [],
        [{"type": "text", "text": ODD_TEXT * 2000}],
        [{"type": "data", "source": {"source_type": "base64", "data": "!!", "media_type": "x/y"}}],
        [{"type": "data", "source": {"source_type": "url", "url": "nope"}, "name": ODD_TEXT}],
        [{"type": "data", "source": {"source_type": "file_id", "id": "f"}}],
    ]
    for index, call_id in enumerate(ARGUMENTS):
        result: dict[str, Any] = {
            "type": "tool_result",
            "id": call_id,
            "name": "",
            "output": outputs[index % len(outputs)],
            "state": ("success", "error", "denied", "interrupted")[index % 4],
        }
        if index == 0:
            result["artifacts"] = odd_artifacts
        results.append(NewMessage(role="tool", kind="normal", content=[result]))  # type: ignore[list-item]
    raw = [
        NewMessage(role="user", kind="normal", content=[{"type": "text", "text": ODD_TEXT}]),
        NewMessage(role="assistant", kind="normal", content=assistant),
        *results,
        NewMessage(role="assistant", kind="normal", content=[]),
        NewMessage(role="user", kind="agent_message", content=[{"type": "text", "text": ODD_TEXT}]),
        NewMessage(role="user", kind="world_state", content=[{"type": "text", "text": "<x>"}]),
        NewMessage(
            role="assistant",
            kind="normal",
            content=[{"type": "tool_call", "id": "dangling", "name": "read", "input": "{"}],
        ),
        NewMessage(role="user", kind="normal", content=[{"type": "text", "text": "go on"}]),
    ]
    # Through the API's own content schema (its defaults and field order, as an append stored
    # them), but not through the checks added since (decodable artifacts, size and depth): the
    # values those checks bound are validated as placeholders and put back as they were.
    return [
        NewMessage(
            role=m.role,
            kind=m.kind,
            content=[
                _restored(checked, original)
                for checked, original in zip(
                    blocks_to_core(
                        MessageIn.model_validate(
                            {"role": m.role, "kind": m.kind, "content": _placeholders(m.content)}
                        ).content
                    ),
                    m.content,
                    strict=True,
                )
            ],
        )
        for m in raw
    ]


# What the API bounds now (nesting and size of free-form JSON): rows stored before.
_BOUNDED = {"input": "{}", "payload": None}


def _placeholders(content: list[Any]) -> list[Any]:
    shallow = []
    for block in content:
        copy = {k: _BOUNDED.get(k, v) for k, v in block.items()}
        if "artifacts" in block:
            copy["artifacts"] = [{**a, "payload": None} for a in block["artifacts"]]
        shallow.append(copy)
    return shallow


def _restored(checked: Any, original: Any) -> Any:
    restored = {k: original.get(k, v) if k in _BOUNDED else v for k, v in checked.items()}
    if "artifacts" in original:
        restored["artifacts"] = [
            {**a, **({"payload": o["payload"]} if "payload" in o else {})}
            for a, o in zip(checked["artifacts"], original["artifacts"], strict=True)
        ]
    return restored


@pytest.fixture(scope="module")
def hostile_postgres_url() -> Iterator[str]:
    """A PostgreSQL database of this module's own: other tests read every session of the
    shared one (a session list), and these rows are meant to be hard on readers."""
    with throwaway_postgres_database() as url:
        asyncio.run(upgrade_to_head(url))
        yield url


@pytest.fixture(params=BACKENDS)
def database_url(request: pytest.FixtureRequest) -> str:
    if request.param == "postgresql":
        return str(request.getfixturevalue("hostile_postgres_url"))
    return str(request.getfixturevalue("sqlite_url"))


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProviderServer]:
    monkeypatch.setenv(KEY_ENV, "sk-test")
    with FakeProviderServer() as server:
        yield server


@pytest.fixture
async def live(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings(
        database_url,
        max_body_bytes=50_000_000,
        events_poll_seconds=0.1,
        summary_retry_delay_seconds=0.0,
    )
    async with (
        serve_in_process(create_app(settings)) as url,
        httpx.AsyncClient(base_url=url, timeout=60) as client,
    ):
        yield client


async def provider_model(api: httpx.AsyncClient, server: FakeProviderServer, kind: str) -> str:
    return await fake_provider_model(
        api, server.base_url, kind, key_env=KEY_ENV, context_window_tokens=4_000_000
    )


async def roomy_local_model(api: httpx.AsyncClient) -> str:
    """The offline model with a window the whole hostile Conversation fits in (so reads do not
    compact it on their own)."""
    model_id = f"roomy-local-{uuid.uuid4().hex[:8]}"
    body = {
        "context_window_tokens": 4_000_000,
        "max_output_tokens": 16_384,
        "provider": {"kind": "local"},
    }
    response = await api.put(f"/v1/models/{model_id}", json=body)
    assert response.status_code == 201, response.text
    return model_id


async def hostile_session(api: httpx.AsyncClient, database_url: str, **body: Any) -> str:
    roomy = await roomy_local_model(api)
    body.setdefault("model_id", roomy)
    sid = await new_session(api, summary_model_id=roomy, **body)
    engine = create_engine(database_url)
    try:
        async with unit_of_work(create_session_factory(engine)) as db:
            await MessageRepository(db).append(sid, hostile_messages())
            # An agent tool whose schema nests as deep as a session could be created with.
            session = await SessionRepository(db).require(sid, for_update=True)
            session.agent = {**session.agent, "tools": [*session.agent["tools"], DEEP_TOOL]}
    finally:
        await engine.dispose()
    return sid


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text[:2000]
    assert response.headers["content-type"].startswith("application/json")
    return loads(response.content)


def html_page(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text[:2000]
    assert response.headers["content-type"].startswith("text/html")
    return response.text


async def all_messages(api: httpx.AsyncClient, sid: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    after = 0
    while True:
        page = ok(await api.get(f"/v1/sessions/{sid}/messages", params={"after_sequence": after}))
        messages += page["messages"]
        if not page["has_more"]:
            return messages
        after = page["messages"][-1]["sequence"]


async def test_raw_reads_give_every_hostile_row_back_exactly(
    live: httpx.AsyncClient, database_url: str
) -> None:
    sid = await hostile_session(live, database_url)
    session = ok(await live.get(f"/v1/sessions/{sid}"))
    assert dumps(session["agent"]["tools"][-1]) == dumps(DEEP_TOOL)
    listed = ok(await live.get("/v1/sessions"))
    assert sid in [s["id"] for s in listed["sessions"]]
    assert ok(await live.get(f"/v1/sessions/{sid}/turns"))["turns"] == []
    # The context map reads the same rows for people.
    assert sid in html_page(await live.get("/ui/parts/sessions"))
    assert "call_over_cap" in html_page(await live.get(f"/ui/parts/sessions/{sid}"))
    stored = await all_messages(live, sid)
    expected = hostile_messages()
    assert len(stored) == len(expected)
    for row, message in zip(stored, expected, strict=True):
        assert (row["role"], row["kind"]) == (message.role, message.kind)
        assert dumps(row["content"]) == dumps(message.content)
    replay = ok(
        await live.get(f"/v1/sessions/{sid}/replay", params={"selector": "through_message:3"})
    )
    assert dumps([m["content"] for m in replay["items"]]) == dumps(
        [m.content for m in expected[:3]]
    )


@pytest.mark.parametrize("encode", [None, "openai_chat", "anthropic_messages"])
async def test_inspection_and_session_prepare_in_every_encoding(
    live: httpx.AsyncClient, database_url: str, encode: str | None
) -> None:
    sid = await hostile_session(live, database_url)
    params = {"encode": encode} if encode else {}
    context = ok(await live.get(f"/v1/sessions/{sid}/context", params=params))
    prepared = ok(await live.post(f"/v1/sessions/{sid}/prepare", params=params, json={}))
    for result in (context, prepared):
        roles = [m["role"] for m in result["request"]["messages"]]
        assert roles.count("tool") == len(ARGUMENTS) + 1  # the dangling call's synthesized result
        assert result["projection"]["synthesized_tool_results"] == 1
        payload = result["provider_payload"]
        if encode == "anthropic_messages":
            uses = {
                block["id"]: block["input"]
                for turn in payload["messages"]
                for block in turn["content"]
                if block["type"] == "tool_use"
            }
            expected = {call_id: value for call_id, (_, value) in ARGUMENTS.items()}
            assert uses == {**expected, "dangling": {}}
        elif encode == "openai_chat":
            (assistant, *_) = [m for m in payload["messages"] if m.get("tool_calls")]
            sent = {c["id"]: c["function"]["arguments"] for c in assistant["tool_calls"]}
            # Sent as the model wrote them (an empty string is the empty object).
            assert sent == {call_id: raw or "{}" for call_id, (raw, _) in ARGUMENTS.items()}
        else:
            assert payload is None


async def test_turns_on_both_protocols_and_their_events(
    live: httpx.AsyncClient, database_url: str, provider: FakeProviderServer
) -> None:
    openai = await provider_model(live, provider, "openai_chat")
    anthropic = await provider_model(live, provider, "anthropic_messages")
    sid = await hostile_session(live, database_url, model_id=openai)
    provider.enqueue(StreamReply(openai_stream(text=["fine ", ODD_TEXT])))
    turn = await run_turn(live, sid, ODD_TEXT)
    assert (turn["status"], turn["phase"]) == ("completed", "terminal"), turn
    assert turn["outcome"] == {"final_text": "fine " + ODD_TEXT}
    sent = loads(provider.requests[-1].body)
    (assistant, *_) = [m for m in sent["messages"] if m.get("tool_calls")]
    assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == [
        raw or "{}" for raw, _ in ARGUMENTS.values()
    ]

    ok(await live.patch(f"/v1/sessions/{sid}", json={"model_id": anthropic}))
    provider.enqueue(StreamReply(anthropic_stream(text=["also fine"])))
    turn = await run_turn(live, sid, "again")
    assert (turn["status"], turn["outcome"]) == ("completed", {"final_text": "also fine"}), turn
    sent = loads(provider.requests[-1].body)
    uses = [b for m in sent["messages"] for b in m["content"] if b["type"] == "tool_use"]
    assert [u["input"] for u in uses[: len(ARGUMENTS)]] == [v for _, v in ARGUMENTS.values()]
    # The payloads that are no Anthropic thinking are not echoed; nothing else is sent.
    assert not [b for m in sent["messages"] for b in m["content"] if "thinking" in b["type"]]

    url = f"/v1/sessions/{sid}/events"
    first = await read_events(live, url)
    second = await read_events(live, url, headers={"Last-Event-ID": str(first[-1].id)})
    for events in (first, second):
        assert events[-1].data["payload"]["status"] == "completed"


async def test_a_turn_that_must_compact_them_first_completes(
    live: httpx.AsyncClient, database_url: str
) -> None:
    sid = await hostile_session(live, database_url)
    # A window the Conversation (about 560 000 tokens) is over the line of, even once pruned.
    small = ok(
        await live.put(
            f"/v1/models/hostile-small-{uuid.uuid4().hex[:8]}",
            json={
                "context_window_tokens": 600_000,
                "max_output_tokens": 1000,
                "provider": {"kind": "scripted", "script": [{"text": "compacted, then answered"}]},
            },
        ),
        201,
    )
    ok(await live.patch(f"/v1/sessions/{sid}", json={"model_id": small["id"]}))
    turn = await run_turn(live, sid)
    assert (turn["status"], turn["outcome"]) == (
        "completed",
        {"final_text": "compacted, then answered"},
    ), turn
    (checkpoint,) = ok(await live.get(f"/v1/sessions/{sid}/compactions"))["compactions"]
    assert checkpoint["kind"] == "threshold"
    full = ok(await live.get(f"/v1/sessions/{sid}/compactions/{checkpoint['compaction_id']}"))
    assert [w["code"] for w in full["runtime_state"]["warnings"]] == ["artifact_skipped"] * 4


@pytest.mark.parametrize("encode", [None, "openai_chat", "anthropic_messages"])
async def test_the_bring_your_own_summary_request_in_every_encoding(
    live: httpx.AsyncClient, database_url: str, encode: str | None
) -> None:
    sid = await hostile_session(live, database_url)
    params = {"encode": encode} if encode else {}
    request = ok(await live.get(f"/v1/sessions/{sid}/compactions/request", params=params))
    # World State never enters a summary request (spec §7.3); everything else does.
    assert request["through_message_sequence"] == len(hostile_messages())
    assert (request["provider_payload"] is None) == (encode is None)


async def test_compactions_rewind_replay_transcript_and_the_history_tool(
    live: httpx.AsyncClient, database_url: str
) -> None:
    sid = await hostile_session(live, database_url)
    expected = hostile_messages()
    # Bring your own model: its request, then the answer naming what it covers.
    request = ok(await live.get(f"/v1/sessions/{sid}/compactions/request"))
    answer = {
        "summary": VALID,
        "through_message_sequence": request["through_message_sequence"],
        "allow_larger": True,
    }
    byo = ok(await live.post(f"/v1/sessions/{sid}/compactions", json=answer), 201)
    local = ok(await live.post(f"/v1/sessions/{sid}/compactions", json={"allow_larger": True}), 201)
    rewound = ok(
        await live.post(f"/v1/sessions/{sid}/rewind", json={"compaction_id": byo["compaction_id"]}),
        201,
    )
    for checkpoint in (byo, local, rewound):
        state = checkpoint["runtime_state"]
        assert state["edited_paths"] == ["é/" + "p" * 1022]
        # The four artifacts no compaction can decode are reported, not fatal.
        assert [w["code"] for w in state["warnings"]] == ["artifact_skipped"] * 4
        # The refused plan set none.
        assert "turn_plan" not in state["extensions"]
    listed = ok(await live.get(f"/v1/sessions/{sid}/compactions"))
    assert [c["compaction_id"] for c in listed["compactions"]] == [
        rewound["compaction_id"],
        local["compaction_id"],
        byo["compaction_id"],
    ]
    ok(await live.get(f"/v1/sessions/{sid}/compactions/{local['compaction_id']}"))
    html_page(await live.get(f"/ui/parts/sessions/{sid}/compactions/{local['compaction_id']}"))
    html_page(await live.get(f"/ui/parts/sessions/{sid}"))
    for selector in ("latest", f"compaction:{local['compaction_id']}", "through_message:4"):
        ok(await live.get(f"/v1/sessions/{sid}/replay", params={"selector": selector}))
    pages: list[dict[str, Any]] = []
    after = 0
    while True:
        page = ok(
            await live.get(
                f"/v1/sessions/{sid}/transcript", params={"after_sequence": after, "limit": 5}
            )
        )
        pages += page["messages"]
        if not page["has_more"]:
            break
        after = page["next_after_sequence"]
    assert dumps([m["content"] for m in pages]) == dumps([m.content for m in expected])

    # The model's own reading of the transcript, in a turn that also plans.
    script = [
        {
            "tool_calls": [
                {"name": "conversation_history", "input": {"limit": 50}},
                {"name": "deep", "input": {}},
                {
                    "name": "update_plan",
                    "input": {"plan": [{"step": ODD_TEXT, "status": "pending"}]},
                },
            ]
        },
        {"text": "read it"},
    ]
    model = ok(
        await live.put(
            f"/v1/models/hostile-script-{uuid.uuid4().hex[:8]}",
            json={
                "context_window_tokens": 4_000_000,
                "max_output_tokens": 1000,
                "provider": {"kind": "scripted", "script": script},
            },
        ),
        201,
    )
    ok(await live.patch(f"/v1/sessions/{sid}", json={"model_id": model["id"]}))
    turn = await run_turn(live, sid)
    assert (turn["status"], turn["outcome"]) == ("completed", {"final_text": "read it"}), turn
    results = [m["content"][0] for m in await all_messages(live, sid) if m["role"] == "tool"]
    history, deep, plan = results[-3:]
    assert (history["state"], plan["state"]) == ("success", "success")
    assert '"hasMore":false' in history["output"][0]["text"]
    # A schema no validator can apply: the call is not run, the model is told so.
    assert deep["state"] == "error"
    assert "its input schema cannot be applied" in deep["output"][0]["text"]


async def test_a_stateless_prepare_encodes_the_same_arguments_the_same_way(
    stateless_client: httpx.AsyncClient,
) -> None:
    # A body may carry arguments only within the API's limits (64 levels);
    # those past them are refused at the door, naming the field, and no request is built.
    taken = {k: v for k, v in ARGUMENTS.items() if json_text_problem(v[0]) is None}
    refused = [k for k in ARGUMENTS if k not in taken]
    assert refused == ["call_deep", "call_at_cap", "call_over_cap", "plan_deep"]

    def body(arguments: dict[str, tuple[str, Any]]) -> dict[str, Any]:
        calls = [
            {"type": "tool_call", "id": call_id, "name": tool_of(call_id), "input": raw}
            for call_id, (raw, _) in arguments.items()
        ]
        return {
            "system_context": [],
            "conversation": [
                {"role": "user", "content": [{"type": "text", "text": "u"}]},
                {"role": "assistant", "content": calls},
            ],
            "tools": [],
            "model": {"context_window_tokens": 4_000_000, "max_output_tokens": 100},
            "encode": "anthropic_messages",
        }

    prepared = ok(await stateless_client.post("/v1/prepare", json=body(taken)))
    (assistant,) = [m for m in prepared["provider_payload"]["messages"] if m["role"] == "assistant"]
    assert [b["input"] for b in assistant["content"]] == [v for _, v in taken.values()]
    for call_id in refused:
        response = await stateless_client.post(
            "/v1/prepare", json=body({call_id: ARGUMENTS[call_id]})
        )
        assert response.status_code == 422, response.text[:500]
        (error,) = response.json()["errors"]
        assert error["loc"] == ["body", "conversation", 1, "content", 0, "tool_call", "input"]
