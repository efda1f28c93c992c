"""Every tool state is visible to the model in both encodings, and no tool message is empty
(spec §9 "Tool state on the wire", ``app/core/tool_state.py``)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from app.core.content import OutputBlock, ToolResultBlock, ToolResultState
from app.core.counting import ESTIMATE
from app.core.tool_state import added_text
from app.providers.encoding import encode_anthropic_messages, encode_openai_chat
from app.providers.tokenizers import TiktokenCounter, get_counter
from app.providers.tokenizers._recipe import DATA_BLOCK_TOKENS
from tests.providers.encoding.requests import image_b64, msg, prepared

STATES: list[ToolResultState] = ["success", "error", "denied", "interrupted"]
LINES = {
    "error": "[tool state: error]",
    "denied": "[tool state: denied]",
    "interrupted": "[tool state: interrupted]",
}
OUTPUTS: dict[str, list[OutputBlock]] = {
    "text": [{"type": "text", "text": "permission check said no"}],
    "none": [],
    "empty text": [{"type": "text", "text": ""}],
    "two texts": [{"type": "text", "text": "out"}, {"type": "text", "text": "err"}],
    "image": [{"type": "text", "text": "see"}, image_b64()],
}


def result(state: ToolResultState, output: list[OutputBlock]) -> ToolResultBlock:
    return {"type": "tool_result", "id": "c1", "name": "bash", "output": output, "state": state}


def openai_content(block: ToolResultBlock) -> Any:
    [message] = encode_openai_chat(prepared(msg("tool", block)))["messages"]
    assert message["role"] == "tool"
    assert message["tool_call_id"] == "c1"
    return message["content"]


def anthropic_block(block: ToolResultBlock) -> dict[str, Any]:
    [turn] = encode_anthropic_messages(prepared(msg("tool", block)))["messages"]
    [encoded] = turn["content"]
    assert encoded["type"] == "tool_result"
    return dict(encoded)


def texts_of(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [part["text"] for part in content if part["type"] == "text"]


@pytest.mark.parametrize("shape", list(OUTPUTS))
@pytest.mark.parametrize("state", STATES)
def test_openai_chat_shows_every_non_success_state_and_never_sends_an_empty_message(
    state: ToolResultState, shape: str
) -> None:
    content = openai_content(result(state, OUTPUTS[shape]))
    assert content not in ("", [])
    first = texts_of(content)[0]
    if state == "success":
        assert not first.startswith("[tool state:")
        if shape in ("none", "empty text"):
            assert content == "[no output]"
    else:
        assert first.startswith(LINES[state])
        if shape == "text":
            assert content == f"{LINES[state]}\npermission check said no"
        if shape in ("none", "empty text"):
            assert content == LINES[state]


@pytest.mark.parametrize("shape", list(OUTPUTS))
@pytest.mark.parametrize("state", STATES)
def test_anthropic_marks_is_error_adds_the_state_line_and_never_sends_empty_content(
    state: ToolResultState, shape: str
) -> None:
    encoded = anthropic_block(result(state, OUTPUTS[shape]))
    content = encoded["content"]
    assert content
    assert all(part.get("text") != "" for part in content)
    if state == "success":
        assert "is_error" not in encoded
        if shape in ("none", "empty text"):
            assert content == [{"type": "text", "text": "[no output]"}]
    else:
        assert encoded["is_error"] is True
        assert content[0] == {"type": "text", "text": LINES[state]}


def test_the_same_result_always_encodes_to_the_same_bytes() -> None:
    block = result("interrupted", [])
    assert json.dumps(encode_openai_chat(prepared(msg("tool", block)))) == json.dumps(
        encode_openai_chat(prepared(msg("tool", result("interrupted", []))))
    )
    assert json.dumps(encode_anthropic_messages(prepared(msg("tool", block)))) == json.dumps(
        encode_anthropic_messages(prepared(msg("tool", result("interrupted", []))))
    )


@pytest.mark.parametrize("shape", list(OUTPUTS))
@pytest.mark.parametrize("state", STATES)
def test_the_exact_counter_counts_the_added_text(state: ToolResultState, shape: str) -> None:
    counter = get_counter("tiktoken:o200k_base")
    assert isinstance(counter, TiktokenCounter)
    block = result(state, OUTPUTS[shape])
    outputs = sum(
        counter.count_text(b["text"]) if b["type"] == "text" else DATA_BLOCK_TOKENS
        for b in block["output"]
    )
    added = added_text(block)
    assert counter.measure_content([block]) == outputs + counter.count_text(added)
    # What it counts is what the encodings send.
    sent = texts_of(openai_content(block))
    assert added.rstrip("\n") in sent or "".join(sent).startswith(added)
    if added:
        anthropic_texts = [p.get("text") for p in anthropic_block(block)["content"]]
        assert added.rstrip("\n") in anthropic_texts


@pytest.mark.parametrize("shape", list(OUTPUTS))
@pytest.mark.parametrize("state", STATES)
def test_the_estimate_never_falls_short_of_the_text_sent(
    state: ToolResultState, shape: str
) -> None:
    """The estimate measures the prepared JSON (spec §3.1); what the OpenAI encoding sends
    for the model (id and content, the state line included) is never longer."""
    block = result(state, OUTPUTS[shape])
    estimate = ESTIMATE.tokens(ESTIMATE.measure_message("tool", [block]))
    content = openai_content(block)
    sent = block["id"] + (content if isinstance(content, str) else json.dumps(content))
    assert estimate >= math.ceil(len(sent.encode()) / 4)
