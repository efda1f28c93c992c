from __future__ import annotations

import json

from app.providers.encoding import encode_openai_chat
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


def test_full_agent_loop_body() -> None:
    body = encode_openai_chat(agent_loop(), model="gpt-4o")
    assert body == {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Read a.py and b.py"},
            {
                "role": "assistant",
                "content": "Reading both.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"path":"a.py"}'},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"path":"b.py"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "print(1)"},
            {"role": "tool", "tool_call_id": "c2", "content": "[tool state: error]\nno such file"},
            {"role": "user", "content": "<sandbox_policy>\nmode: auto\n</sandbox_policy>"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "read",
                    "description": "Read a file",
                    "parameters": READ_TOOL["input_schema"],
                },
            }
        ],
        "max_completion_tokens": 400,
    }


def test_each_system_part_is_its_own_system_message_in_order() -> None:
    body = encode_openai_chat(
        prepared(
            msg("system", text("agent")), msg("system", text("project")), msg("user", text("hi"))
        )
    )
    assert [(m["role"], m["content"]) for m in body["messages"]] == [
        ("system", "agent"),
        ("system", "project"),
        ("user", "hi"),
    ]
    assert "model" not in body


def test_streaming_asks_for_usage_in_the_last_chunk() -> None:
    body = encode_openai_chat(prepared(msg("user", text("hi"))), model="m", stream=True)
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert "stream" not in encode_openai_chat(prepared(msg("user", text("hi"))))


def test_empty_tools_are_omitted() -> None:
    assert "tools" not in encode_openai_chat(prepared(msg("user", text("hi"))))


def test_thinking_and_provider_opaque_are_not_sent() -> None:
    opaque = {"type": "provider_opaque", "driver": "anthropic", "kind": "thinking", "payload": {}}
    body = encode_openai_chat(
        prepared(
            msg("assistant", {"type": "thinking", "thinking": "secret plan"}, opaque, text("Hi"))
        )
    )
    assert body["messages"] == [{"role": "assistant", "content": "Hi"}]
    assert "secret plan" not in json.dumps(body)


def test_tool_call_only_turn_has_null_content_and_raw_arguments_verbatim() -> None:
    raw = '{"path": "x",  "n": 1}'
    body = encode_openai_chat(prepared(msg("assistant", call("c9", raw=raw))))
    message = body["messages"][0]
    assert message["content"] is None
    assert message["tool_calls"][0]["function"]["arguments"] == raw


def test_empty_raw_arguments_become_the_empty_object() -> None:
    body = encode_openai_chat(prepared(msg("assistant", call("c1", raw=""))))
    assert body["messages"][0]["tool_calls"][0]["function"]["arguments"] == "{}"


def test_assistant_without_text_or_calls_sends_an_empty_string() -> None:
    body = encode_openai_chat(prepared(msg("assistant", {"type": "thinking", "thinking": "x"})))
    assert body["messages"] == [{"role": "assistant", "content": ""}]


def test_images_become_image_url_parts() -> None:
    url_image = {
        "type": "data",
        "source": {"source_type": "url", "url": "https://x/y.jpg", "media_type": None},
        "name": None,
    }
    body = encode_openai_chat(prepared(msg("user", text("look"), image_b64(), url_image)))
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}},
        {"type": "image_url", "image_url": {"url": "https://x/y.jpg"}},
    ]


def test_pdf_becomes_a_file_part_and_other_media_a_note() -> None:
    pdf = image_b64("JVBER", "application/pdf")
    zip_file = {
        "type": "data",
        "source": {"source_type": "base64", "data": "UEsD", "media_type": "application/zip"},
        "name": "src.zip",
    }
    file_id = {"type": "data", "source": {"source_type": "file_id", "id": "file-1"}, "name": None}
    parts = encode_openai_chat(prepared(msg("user", pdf, zip_file, file_id)))["messages"][0][
        "content"
    ]
    assert parts[0] == {
        "type": "file",
        "file": {"filename": "shot.png", "file_data": "data:application/pdf;base64,JVBER"},
    }
    assert parts[1]["type"] == "text"
    assert "src.zip (application/zip)" in parts[1]["text"]
    assert parts[2]["type"] == "text"
    assert "file id file-1" in parts[2]["text"]


def test_tool_result_with_several_blocks_keeps_them_as_text_parts() -> None:
    block = result("c1", "line 1")
    block["output"] = [text("line 1"), image_b64(), text("line 2")]  # type: ignore[list-item]
    body = encode_openai_chat(prepared(msg("tool", block)))
    content = body["messages"][0]["content"]
    assert [p["type"] for p in content] == ["text", "text", "text"]
    assert content[0]["text"] == "line 1"
    assert content[2]["text"] == "line 2"
    assert "shot.png" in content[1]["text"]


def test_same_request_same_bytes_and_input_untouched() -> None:
    request = agent_loop()
    before = json.dumps(request, sort_keys=False)
    first = json.dumps(encode_openai_chat(request, model="m", stream=True))
    second = json.dumps(encode_openai_chat(agent_loop(), model="m", stream=True))
    assert first == second
    assert json.dumps(request, sort_keys=False) == before
