from __future__ import annotations

import json
from typing import Any

import pytest

from app.providers.encoding import encode_anthropic_messages
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


def _opaque(kind: str, payload: Any, driver: str = "anthropic") -> dict[str, Any]:
    return {"type": "provider_opaque", "driver": driver, "kind": kind, "payload": payload}


def test_full_agent_loop_merges_tool_results_and_world_state_into_one_user_turn() -> None:
    body = encode_anthropic_messages(agent_loop(), model="claude-x", stream=True)
    assert body == {
        "model": "claude-x",
        "max_tokens": 400,
        "system": [{"type": "text", "text": "You are terse."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Read a.py and b.py"}]},
            {
                "role": "assistant",
                "content": [
                    # No signature: the thinking is dropped.
                    {"type": "text", "text": "Reading both."},
                    {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "a.py"}},
                    {"type": "tool_use", "id": "c2", "name": "read", "input": {"path": "b.py"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "c1",
                        "content": [{"type": "text", "text": "print(1)"}],
                    },
                    {
                        "type": "tool_result",
                        "tool_use_id": "c2",
                        "content": [
                            {"type": "text", "text": "[tool state: error]"},
                            {"type": "text", "text": "no such file"},
                        ],
                        "is_error": True,
                    },
                    {"type": "text", "text": "<sandbox_policy>\nmode: auto\n</sandbox_policy>"},
                ],
            },
        ],
        "tools": [READ_TOOL],
        "stream": True,
    }


def test_system_parts_become_top_level_text_blocks_in_order() -> None:
    body = encode_anthropic_messages(
        prepared(
            msg("system", text("agent")), msg("system", text("project")), msg("user", text("q"))
        )
    )
    assert body["system"] == [
        {"type": "text", "text": "agent"},
        {"type": "text", "text": "project"},
    ]
    assert [m["role"] for m in body["messages"]] == ["user"]


def test_no_system_and_no_tools_are_omitted() -> None:
    body = encode_anthropic_messages(prepared(msg("user", text("hi"))))
    assert set(body) == {"max_tokens", "messages"}


def test_consecutive_user_messages_merge() -> None:
    body = encode_anthropic_messages(
        prepared(msg("user", text("<skill>x</skill>")), msg("user", text("do it")))
    )
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<skill>x</skill>"},
                {"type": "text", "text": "do it"},
            ],
        }
    ]


@pytest.mark.parametrize(
    ("state", "flagged"),
    [("success", False), ("error", True), ("denied", True), ("interrupted", True)],
)
def test_failed_tool_results_are_flagged_is_error(state: Any, flagged: bool) -> None:
    body = encode_anthropic_messages(prepared(msg("tool", result("c1", "x", state))))
    block = body["messages"][0]["content"][0]
    assert block.get("is_error", False) is flagged


def test_unparseable_or_non_object_tool_input_becomes_empty_object() -> None:
    body = encode_anthropic_messages(
        prepared(
            msg("assistant", call("a", raw='{"path": '), call("b", raw="[1, 2]"), call("c", raw=""))
        )
    )
    assert [b["input"] for b in body["messages"][0]["content"]] == [{}, {}, {}]


def test_signed_thinking_is_echoed_first_with_its_signature() -> None:
    body = encode_anthropic_messages(
        prepared(
            msg(
                "assistant",
                {"type": "thinking", "thinking": "let me see"},
                text("Done."),
                _opaque("thinking", {"signature": "sig=="}),
                call("c1"),
            )
        )
    )
    assert body["messages"][0]["content"] == [
        {"type": "thinking", "thinking": "let me see", "signature": "sig=="},
        {"type": "text", "text": "Done."},
        {"type": "tool_use", "id": "c1", "name": "read", "input": {"path": "a.py"}},
    ]


def test_several_signed_thinking_blocks_and_redacted_keep_their_order() -> None:
    body = encode_anthropic_messages(
        prepared(
            msg(
                "assistant",
                {"type": "thinking", "thinking": "onetwo"},
                _opaque("thinking", {"thinking": "one", "signature": "s1"}),
                _opaque("redacted_thinking", {"data": "ENC"}),
                _opaque("thinking", {"thinking": "two", "signature": "s2"}),
                text("ok"),
            )
        )
    )
    assert body["messages"][0]["content"] == [
        {"type": "thinking", "thinking": "one", "signature": "s1"},
        {"type": "redacted_thinking", "data": "ENC"},
        {"type": "thinking", "thinking": "two", "signature": "s2"},
        {"type": "text", "text": "ok"},
    ]


def test_opaque_blocks_of_other_drivers_or_without_signature_are_dropped() -> None:
    body = encode_anthropic_messages(
        prepared(
            msg(
                "assistant",
                {"type": "thinking", "thinking": "hmm"},
                text("Hi"),
                _opaque("thinking", {"signature": "s"}, driver="openai_chat"),
                _opaque("thinking", {"no_signature": True}),
                _opaque("unknown_kind", {"x": 1}),
            )
        )
    )
    assert body["messages"][0]["content"] == [{"type": "text", "text": "Hi"}]


def test_message_left_empty_is_omitted_and_neighbours_merge() -> None:
    body = encode_anthropic_messages(
        prepared(
            msg("user", text("a")),
            msg("assistant", {"type": "thinking", "thinking": "unsigned"}),
            msg("user", text("b")),
        )
    )
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    ]


def test_empty_text_blocks_are_not_sent() -> None:
    body = encode_anthropic_messages(prepared(msg("user", text(""), text("x"))))
    assert body["messages"][0]["content"] == [{"type": "text", "text": "x"}]


def test_attachments_images_pdf_and_notes() -> None:
    url_image = {
        "type": "data",
        "source": {"source_type": "url", "url": "https://x/y.gif", "media_type": "image/gif"},
        "name": None,
    }
    pdf_url = {
        "type": "data",
        "source": {"source_type": "url", "url": "https://x/a.pdf", "media_type": "application/pdf"},
        "name": "a.pdf",
    }
    csv = {
        "type": "data",
        "source": {"source_type": "base64", "data": "YSxi", "media_type": "text/csv"},
        "name": "t.csv",
    }
    body = encode_anthropic_messages(prepared(msg("user", image_b64(), url_image, pdf_url, csv)))
    content = body["messages"][0]["content"]
    assert content[0] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"},
    }
    assert content[1] == {"type": "image", "source": {"type": "url", "url": "https://x/y.gif"}}
    assert content[2] == {"type": "document", "source": {"type": "url", "url": "https://x/a.pdf"}}
    assert content[3]["type"] == "text"
    assert "t.csv (text/csv)" in content[3]["text"]


def test_image_in_tool_result_is_kept_and_empty_output_says_so() -> None:
    with_image = result("c1", "see")
    with_image["output"] = [text("see"), image_b64()]  # type: ignore[list-item]
    empty = result("c2")
    empty["output"] = [text("")]
    body = encode_anthropic_messages(prepared(msg("tool", with_image), msg("tool", empty)))
    first, second = body["messages"][0]["content"]
    assert [b["type"] for b in first["content"]] == ["text", "image"]
    assert second == {
        "type": "tool_result",
        "tool_use_id": "c2",
        "content": [{"type": "text", "text": "[no output]"}],
    }


def test_deterministic_and_does_not_mutate_input() -> None:
    request = agent_loop()
    before = json.dumps(request)
    assert json.dumps(encode_anthropic_messages(request)) == json.dumps(
        encode_anthropic_messages(agent_loop())
    )
    assert json.dumps(request) == before
