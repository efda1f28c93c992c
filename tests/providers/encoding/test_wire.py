"""The body bytes an adapter sends are exactly ``json.dumps`` of the protocol's encoding, also
when messages come from the memo of earlier calls (``app/providers/encoding/wire.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import app.providers.encoding.wire as wire
from app.providers.encoding import (
    encode_anthropic_messages,
    encode_openai_chat,
    encode_openai_responses,
)
from tests.providers.encoding.requests import (
    READ_TOOL,
    agent_loop,
    call,
    image_b64,
    msg,
    prepared,
    result,
    text,
)

Body = Callable[..., bytes]
PROTOCOLS: list[tuple[Body, Callable[..., dict[str, Any]]]] = [
    (wire.openai_chat_body, encode_openai_chat),
    (wire.anthropic_messages_body, encode_anthropic_messages),
    (wire.openai_responses_body, encode_openai_responses),
]


@pytest.fixture(autouse=True)
def empty_memo() -> Iterator[None]:
    wire.forget()
    yield
    wire.forget()


def expected(encode: Callable[..., dict[str, Any]], request: dict[str, Any]) -> bytes:
    body = encode(request, model="m-1", stream=True)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def requests() -> list[dict[str, Any]]:
    return [
        agent_loop(),
        prepared(),  # no message at all
        prepared(msg("user", text('naïve — ünïcödé \u2028 "quoted" \\ back'))),
        prepared(
            msg("system", text("one")),
            msg("system", text("two")),
            msg("user", text("")),  # left empty: omitted by one protocol, not the other
            msg("user", text("a"), image_b64()),
            msg("user", text("b")),
            msg("assistant", call("c1", raw="")),
            msg("tool", result("c1", "", state="interrupted")),
            tools=[READ_TOOL],
        ),
    ]


@pytest.mark.parametrize(("body", "encode"), PROTOCOLS)
def test_the_body_is_the_json_of_the_encoding(body: Body, encode: Any) -> None:
    for request in requests():
        assert body(request, model="m-1", stream=True) == expected(encode, request)
        # A second time, every message from the memo: the same bytes.
        assert body(request, model="m-1", stream=True) == expected(encode, request)


@pytest.mark.parametrize(("body", "encode"), PROTOCOLS)
def test_a_growing_conversation_keeps_matching(body: Body, encode: Any) -> None:
    request = agent_loop()
    for step in range(6):
        request = {
            **request,
            "messages": [
                *request["messages"],
                msg("assistant", text(f"step {step}"), call(f"s{step}")),
                msg("tool", result(f"s{step}", f"out {step}")),
            ],
        }
        assert body(request, model="m-1", stream=True) == expected(encode, request)


@pytest.mark.parametrize(("body", "encode"), PROTOCOLS)
def test_one_content_under_another_role_is_encoded_for_that_role(body: Body, encode: Any) -> None:
    shared = [text("same blocks")]
    as_user = prepared({"role": "user", "content": shared})
    as_assistant = prepared({"role": "assistant", "content": shared})
    body(as_user, model="m-1", stream=True)
    assert body(as_assistant, model="m-1", stream=True) == expected(encode, as_assistant)


@pytest.mark.parametrize(("body", "encode"), PROTOCOLS)
def test_a_full_memo_drops_old_messages_and_stays_exact(
    body: Body, encode: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wire, "_openai_memo", wire._Memo(max_bytes=200))
    monkeypatch.setattr(wire, "_anthropic_memo", wire._Memo(max_bytes=200))
    monkeypatch.setattr(wire, "_responses_memo", wire._Memo(max_bytes=200))
    for request in [*requests(), *requests()]:
        assert body(request, model="m-1", stream=True) == expected(encode, request)


@pytest.mark.parametrize(("body", "encode"), PROTOCOLS)
def test_a_conversation_larger_than_the_memo_grows_exactly(
    body: Body, encode: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its last call's pieces are kept though over the bound; each next body is still exact.
    for name in ("_openai_memo", "_anthropic_memo", "_responses_memo"):
        monkeypatch.setattr(wire, name, wire._Memo(max_bytes=200))
    conversation = _conversation(30)
    for step in range(4):
        conversation = [*conversation, msg("assistant", text(f"step {step}"))]
        request = _with(f"sys {step}", conversation)
        assert body(request, model="m-1", stream=True) == expected(encode, request)


@pytest.mark.parametrize(("body", "encode"), PROTOCOLS)
def test_text_that_holds_the_placeholder_still_gives_the_exact_body(
    body: Body, encode: Any
) -> None:
    # The placeholder holds U+0000, which the API refuses; a system part built elsewhere could.
    request = prepared(msg("system", text("\x00messages\x00")), msg("user", text("hi")))
    assert body(request, model="m-1", stream=True) == expected(encode, request)


# -- a Conversation encoded again after an edit (the message memo keeps the body exact) ---------


def _conversation(size: int) -> list[dict[str, Any]]:
    return [msg("user" if i % 2 else "assistant", text(f"message {i}")) for i in range(size)]


def _with(system: str, conversation: list[dict[str, Any]]) -> dict[str, Any]:
    # A fresh system message each time, as a turn step reads it with the session row.
    return prepared(msg("system", text(system)), *conversation)


Edit = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
EDITS: dict[str, Edit] = {
    "append": lambda c: [*c, msg("assistant", text(f"new {len(c)}"))],
    "replace a middle message": lambda c: [*c[:2], msg("user", text("changed")), *c[3:]],
    "replace the first message": lambda c: [msg("user", text("first changed")), *c[1:]],
    "the same content under another role": lambda c: [
        c[0],
        {"role": "assistant" if c[1]["role"] == "user" else "user", "content": c[1]["content"]},
        *c[2:],
    ],
    "shorter (a compaction)": lambda c: c[:3],
    # Nothing a Responses body can carry: no input item at all.
    "a thinking-only answer": lambda c: [
        *c,
        msg("assistant", {"type": "thinking", "thinking": "t"}),
    ],
    "empty": lambda c: [],
    # A system message after the first user message: it is part of the remembered chain.
    "a system message in the middle, then one more": lambda c: [
        *c[:2],
        msg("system", text("mid")),
        *c[2:],
        msg("user", text("more")),
    ],
}


@pytest.mark.parametrize(("body", "encode"), PROTOCOLS)
@pytest.mark.parametrize("edit", list(EDITS), ids=list(EDITS))
def test_a_remembered_conversation_is_reused_only_where_it_still_holds(
    edit: str, body: Body, encode: Any
) -> None:
    conversation = _conversation(6)
    first = _with("sys", conversation)
    assert body(first, model="m-1", stream=True) == expected(encode, first)
    changed = _with("sys again", EDITS[edit](conversation))
    assert body(changed, model="m-1", stream=True) == expected(encode, changed)
    # And back: the first conversation (its entry may have been replaced) is exact too.
    assert body(first, model="m-1", stream=True) == expected(encode, first)


@pytest.mark.parametrize(("body", "encode"), PROTOCOLS)
@pytest.mark.parametrize("edit", list(EDITS), ids=list(EDITS))
def test_a_session_memo_reuses_its_last_request_only_where_it_still_holds(
    edit: str, body: Body, encode: Any
) -> None:
    # The same edits through a session context's own memo (the turn path): exact bytes.
    token = wire.owned_by(wire.OwnedMemo())
    try:
        conversation = _conversation(6)
        first = _with("sys", conversation)
        assert body(first, model="m-1", stream=True) == expected(encode, first)
        changed = _with("sys again", EDITS[edit](conversation))
        assert body(changed, model="m-1", stream=True) == expected(encode, changed)
        assert body(first, model="m-1", stream=True) == expected(encode, first)
        grown = _with("sys", [*conversation, msg("user", text("one more"))])
        assert body(grown, model="m-1", stream=True) == expected(encode, grown)
    finally:
        wire._OWNER.reset(token)
