"""The OpenAI Responses codec reads a stateless request into the content model, or refuses it."""

from __future__ import annotations

from typing import Any

import pytest

from app.api.compat.openai_responses import CODEC, REFUSALS
from app.core.errors import InvalidInput
from app.providers.encoding.openai_responses import encode_openai_responses

REASONING = {
    "id": "rs_1",
    "type": "reasoning",
    "summary": [{"type": "summary_text", "text": "Think first."}],
    "encrypted_content": "gAAA-opaque",
}


def body(**fields: Any) -> dict[str, Any]:
    return {"model": "gpt-test", "input": "hi", "store": False, **fields}


def refusal(payload: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        CODEC.decode(payload)
    return caught.value


def test_a_string_input_is_one_user_message_and_other_fields_are_params() -> None:
    request = CODEC.decode(
        body(
            instructions="Be brief.",
            max_output_tokens=256,
            stream=True,
            temperature=0.1,
            include=["reasoning.encrypted_content"],
        )
    )
    assert request.protocol == "openai_responses"
    assert request.system == "Be brief."
    assert [(m.role, m.content) for m in request.messages] == [
        ("user", [{"type": "text", "text": "hi"}])
    ]
    assert request.max_output_tokens == 256
    assert request.stream is True
    assert request.params == {
        "store": False,
        "temperature": 0.1,
        "include": ["reasoning.encrypted_content"],
    }


def test_items_read_as_the_messages_the_encoding_sends_back() -> None:
    answer = [
        REASONING,
        {"type": "message", "role": "assistant", "content": "Looking."},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"q": 1}'},
    ]
    items: list[dict[str, Any]] = [
        {"role": "developer", "content": "Answer in French."},
        {"role": "user", "content": "Define ère."},
        *answer,
        {"type": "function_call_output", "call_id": "c1", "output": "a vowel"},
        {"role": "system", "content": [{"type": "input_text", "text": "Cite sources."}]},
        {"role": "user", "content": [{"type": "input_text", "text": "Thanks."}]},
    ]
    request = CODEC.decode(
        body(
            input=items,
            instructions="Be brief.",
            tools=[{"type": "function", "name": "lookup", "parameters": None, "strict": True}],
        )
    )
    assert request.system == "Be brief.\n\nAnswer in French.\n\nCite sources."
    assert [m.role for m in request.messages] == ["user", "assistant", "tool", "user"]
    assert request.messages[2].content == [
        {
            "type": "tool_result",
            "id": "c1",
            "name": "lookup",
            "output": [{"type": "text", "text": "a vowel"}],
            "state": "success",
        }
    ]
    assert request.tools == [
        {
            "name": "lookup",
            "description": "",
            "input_schema": {"type": "object", "properties": {}},
        }
    ]
    encoded = encode_openai_responses(
        {"messages": [{"role": m.role, "content": m.content} for m in request.messages[1:2]]}
    )
    assert encoded["input"] == answer


def test_a_name_of_a_call_made_before_a_developer_message_reaches_its_result() -> None:
    request = CODEC.decode(
        body(
            input=[
                {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
                {"role": "developer", "content": "Now summarize."},
                {"type": "function_call_output", "call_id": "c1", "output": "x"},
            ]
        )
    )
    result = request.messages[1].content[0]
    assert result["type"] == "tool_result"
    assert result["name"] == "lookup"


REFUSED: list[tuple[Any, str]] = [
    ("text", "invalid_request"),
    (body(model=None), "invalid_model"),
    (body(previous_response_id="resp_1"), "previous_response_id_unsupported"),
    (body(conversation="conv_1"), "previous_response_id_unsupported"),
    (body(input=[]), "invalid_input"),
    (body(input=42), "invalid_input"),
    (body(input=["hi"]), "invalid_input"),
    (body(instructions=["x"]), "invalid_system"),
    (body(max_output_tokens=0), "invalid_max_tokens"),
    (body(temperature="0"), "invalid_sampling"),
    (body(tool_choice={"type": "function"}), "invalid_sampling"),
    (body(stream=1), "invalid_request"),
    (body(tools=[{"type": "web_search"}]), "unsupported_tool"),
    (body(tools=[{"type": "function", "name": "f", "parameters": "x"}]), "invalid_tools"),
    (body(input=[{"type": "item_reference", "id": "msg_1"}]), "unsupported_item"),
    (
        body(input=[{"role": "developer", "content": [{"type": "input_image"}]}]),
        "unsupported_item",
    ),
]


@pytest.mark.parametrize(("payload", "code"), REFUSED)
def test_a_request_it_cannot_serve_is_refused_by_code(payload: Any, code: str) -> None:
    assert refusal(payload).code == code


def test_a_refused_item_is_named_by_its_index_in_the_whole_input() -> None:
    error = refusal(
        body(
            input=[
                {"role": "developer", "content": "x"},
                {"role": "user", "content": "q"},
                {"type": "web_search_call", "id": "ws_1"},
            ]
        )
    )
    assert error.code == "unsupported_item"
    assert "item 2 " in error.detail


def test_max_output_tokens_boundary() -> None:
    assert CODEC.decode(body(max_output_tokens=1)).max_output_tokens == 1
    assert CODEC.decode(body(previous_response_id=None)).messages


def test_every_code_it_refuses_with_is_listed_for_the_api_description() -> None:
    assert {code for _, code in REFUSED} == set(REFUSALS)
