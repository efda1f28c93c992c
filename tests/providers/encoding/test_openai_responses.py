from __future__ import annotations

import json
from typing import Any

from app.providers.encoding import encode_openai_responses
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
from tests.providers.encoding.sdk_types import assert_responses_body

REASONING_ITEM = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "two reads"}],
    "encrypted_content": "gAAAA-opaque",
}


def opaque(payload: Any, driver: str = "openai_responses") -> dict[str, Any]:
    return {"type": "provider_opaque", "driver": driver, "kind": "reasoning", "payload": payload}


def test_full_agent_loop_body() -> None:
    body = encode_openai_responses(agent_loop(), model="gpt-5-codex", reasoning=True)
    assert body == {
        "model": "gpt-5-codex",
        "input": [
            {"type": "message", "role": "system", "content": "You are terse."},
            {"type": "message", "role": "user", "content": "Read a.py and b.py"},
            # The bare thinking block has no reasoning item: nothing is sent for it.
            {"type": "message", "role": "assistant", "content": "Reading both."},
            {
                "type": "function_call",
                "call_id": "c1",
                "name": "read",
                "arguments": '{"path":"a.py"}',
            },
            {
                "type": "function_call",
                "call_id": "c2",
                "name": "read",
                "arguments": '{"path":"b.py"}',
            },
            {"type": "function_call_output", "call_id": "c1", "output": "print(1)"},
            {
                "type": "function_call_output",
                "call_id": "c2",
                "output": "[tool state: error]\nno such file",
            },
            {
                "type": "message",
                "role": "user",
                "content": "<sandbox_policy>\nmode: auto\n</sandbox_policy>",
            },
        ],
        "tools": [
            {
                "type": "function",
                "name": "read",
                "description": "Read a file",
                "parameters": READ_TOOL["input_schema"],
                "strict": False,
            }
        ],
        "max_output_tokens": 400,
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }
    assert_responses_body(body)
    assert_responses_body(encode_openai_responses(agent_loop(), model="m", stream=True))


def test_only_a_reasoning_model_asks_for_its_reasoning_state_back() -> None:
    # OpenAI answers 400 "Encrypted content is not supported with this model" to an ``include``
    # of the reasoning state for gpt-4o, gpt-4.1 or gpt-5-chat: a model that does not reason
    # sends none, and otherwise the same body.
    reasoning = encode_openai_responses(agent_loop(), model="o3", reasoning=True)
    plain = encode_openai_responses(agent_loop(), model="o3")
    assert reasoning["include"] == ["reasoning.encrypted_content"]
    assert "include" not in plain
    assert {k: v for k, v in reasoning.items() if k != "include"} == plain
    assert plain["store"] is False  # stateless either way
    assert_responses_body(plain)


def test_a_reasoning_item_is_echoed_verbatim_before_the_answer() -> None:
    answer = msg(
        "assistant",
        {"type": "thinking", "thinking": "two reads"},
        text("Reading."),
        opaque(REASONING_ITEM),
        opaque({"signature": "x"}, driver="anthropic"),
        call("c1"),
    )
    body = encode_openai_responses(prepared(msg("user", text("go")), answer))
    assert body["input"][1:] == [
        REASONING_ITEM,
        {"type": "message", "role": "assistant", "content": "Reading."},
        {"type": "function_call", "call_id": "c1", "name": "read", "arguments": '{"path":"a.py"}'},
    ]
    assert "signature" not in json.dumps(body)
    assert_responses_body(body)


def test_an_answer_with_nothing_to_send_adds_no_item() -> None:
    body = encode_openai_responses(
        prepared(msg("assistant", {"type": "thinking", "thinking": "x"}), msg("user", text("q")))
    )
    assert body["input"] == [{"type": "message", "role": "user", "content": "q"}]


def test_tool_call_arguments_verbatim_and_empty_ones_the_empty_object() -> None:
    raw = '{"path": "x",  "n": 1}'
    body = encode_openai_responses(
        prepared(msg("assistant", call("a", raw=raw), call("b", raw="")))
    )
    assert [i["arguments"] for i in body["input"]] == [raw, "{}"]


def test_results_carry_their_state_and_never_go_empty() -> None:
    body = encode_openai_responses(
        prepared(
            msg("tool", result("c1", "", state="success")),
            msg("tool", result("c2", "", state="denied")),
        )
    )
    assert [i["output"] for i in body["input"]] == ["[no output]", "[tool state: denied]"]


def test_a_result_with_several_blocks_is_input_text_parts() -> None:
    block = result("c1", "line 1", state="interrupted")
    block["output"] = [text("line 1"), image_b64(), text("line 2")]  # type: ignore[list-item]
    body = encode_openai_responses(prepared(msg("tool", block)))
    output = body["input"][0]["output"]
    assert [p["type"] for p in output] == ["input_text"] * 4
    assert output[0]["text"] == "[tool state: interrupted]"
    assert "shot.png" in output[2]["text"]
    assert_responses_body(body)


def test_attachments_are_input_images_files_or_notes() -> None:
    pdf = image_b64("JVBER", "application/pdf")
    zip_file = {
        "type": "data",
        "source": {"source_type": "base64", "data": "UEsD", "media_type": "application/zip"},
        "name": "src.zip",
    }
    body = encode_openai_responses(prepared(msg("user", text("look"), image_b64(), pdf, zip_file)))
    parts = body["input"][0]["content"]
    assert parts[:3] == [
        {"type": "input_text", "text": "look"},
        {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0K", "detail": "auto"},
        {
            "type": "input_file",
            "filename": "shot.png",
            "file_data": "data:application/pdf;base64,JVBER",
        },
    ]
    assert parts[3]["type"] == "input_text"
    assert "src.zip" in parts[3]["text"]
    assert_responses_body(body)


def test_same_request_same_bytes_and_input_untouched() -> None:
    request = agent_loop()
    before = json.dumps(request)
    first = json.dumps(encode_openai_responses(request, model="m", stream=True))
    assert first == json.dumps(encode_openai_responses(agent_loop(), model="m", stream=True))
    assert json.dumps(request) == before
