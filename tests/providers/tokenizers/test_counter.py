"""Exact counts: equal to tiktoken's own, framed as OpenAI's cookbook publishes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import tiktoken

from app.core.content import Block, DataBlock, ToolResultBlock, text_block
from app.providers.tokenizers import TiktokenCounter
from app.providers.tokenizers._loader import load_encoding

# Token ids printed in OpenAI's cookbook "How to count tokens with tiktoken" (§3 and §5).
PUBLISHED_IDS = {
    ("o200k_base", "tiktoken is great!"): [83, 8251, 2488, 382, 2212, 0],
    ("cl100k_base", "antidisestablishmentarianism"): [519, 85342, 34500, 479, 8997, 2191],
    ("o200k_base", "antidisestablishmentarianism"): [493, 129901, 376, 160388, 21203, 2367],
    ("cl100k_base", "2 + 2 = 4"): [17, 489, 220, 17, 284, 220, 19],
    ("o200k_base", "2 + 2 = 4"): [17, 659, 220, 17, 314, 220, 19],
    ("cl100k_base", "お誕生日おめでとう"): [
        33334,
        45918,
        243,
        21990,
        9080,
        33334,
        62004,
        16556,
        78699,
    ],
    ("o200k_base", "お誕生日おめでとう"): [8930, 9697, 243, 128225, 8930, 17693, 4344, 48669],
}

CORPUS = [
    "",
    "Hello, world! The quick brown fox jumps over the lazy dog.",
    "   leading spaces\n\ttabs\r\nwindows lines\n\n\n",
    "日本語のトークナイザー、中文分词测试，한국어 텍스트입니다.",
    "emoji 🚀🔥👍🏽 family 👨‍👩‍👧‍👦 flags 🇫🇷🇯🇵",
    'def f(x: int) -> list[int]:\n    return [i**2 for i in range(x)]  # ok\n\nprint(f(3), "")\n',
    '{"path":"src/app.py","lines":[1,2,3],"ok":true,"note":"naïve café — Zürich"}',
    "Ω≈ç√∫ Икс हिन्दी العربية עברית ελληνικά 0xDEADBEEF 3.14159 99.99%",
    "don't can't I'll we've THEY'RE 'tis",
    "a" * 3000 + " " + "1234567890" * 50,
]

COOKBOOK_MESSAGES: list[dict[str, str]] = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate "
        "jargon into plain English.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "New synergies will help drive top-line growth.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on opportunities "
        "for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client "
        "deliverable.",
    },
]

COOKBOOK_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_current_weather",
            "description": "Get the current weather in a given location",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {
                        "type": "string",
                        "description": "The city and state, e.g. San Francisco, CA",
                    },
                    "unit": {
                        "type": "string",
                        "description": "The unit of temperature to return",
                        "enum": ["celsius", "fahrenheit"],
                    },
                },
                "required": ["location"],
            },
        },
    }
]

# Prompt tokens the cookbook prints for its examples, equal to the API's reported usage.
COOKBOOK_CHAT_TOKENS = {"o200k_base": 124, "cl100k_base": 129}  # gpt-4o / gpt-4
COOKBOOK_TOOLS_TOKENS = {"o200k_base": 101, "cl100k_base": 105}

IMAGE: DataBlock = {
    "type": "data",
    "source": {
        "source_type": "url",
        "url": "https://example.test/a.png",
        "media_type": "image/png",
    },
    "name": None,
}


@pytest.mark.parametrize(("encoding", "text"), sorted(PUBLISHED_IDS))
def test_published_token_ids(
    counters: dict[str, TiktokenCounter], encoding: str, text: str
) -> None:
    assert counters[encoding].count_text(text) == len(PUBLISHED_IDS[encoding, text])


def test_published_ids_come_from_the_loaded_vocabulary(
    reference_encodings: dict[str, tiktoken.Encoding],
) -> None:
    for (encoding, text), ids in PUBLISHED_IDS.items():
        assert reference_encodings[encoding].encode_ordinary(text) == ids


@pytest.mark.parametrize("text", CORPUS, ids=range(len(CORPUS)))
def test_text_counts_equal_tiktoken(
    counter: TiktokenCounter, reference: tiktoken.Encoding, text: str
) -> None:
    expected = len(reference.encode(text, disallowed_special=()))
    assert counter.count_text(text) == expected
    assert counter.measure_content([text_block(text)]) == expected


def test_special_token_text_counts_as_ordinary_text(
    counter: TiktokenCounter, reference: tiktoken.Encoding
) -> None:
    text = "end here <|endoftext|> and <|endofprompt|> go on"
    # The provider reads a user's "<|endoftext|>" as characters, never as the control token.
    assert counter.count_text(text) == len(reference.encode_ordinary(text))
    assert counter.count_text(text) > len(reference.encode(text, allowed_special="all"))


def test_cookbook_chat_example(counter: TiktokenCounter, encoding_name: str) -> None:
    total = counter.request_overhead_tokens + sum(
        counter.frame_message(m["role"], counter.count_text(m["content"]), name=m.get("name"))
        for m in COOKBOOK_MESSAGES
    )
    assert total == COOKBOOK_CHAT_TOKENS[encoding_name]


def test_cookbook_tools_example(counter: TiktokenCounter, encoding_name: str) -> None:
    system = "You are a helpful assistant that can answer to questions about the weather."
    user = "What's the weather like in San Francisco?"
    total = (
        counter.measure_message("system", [text_block(system)])
        + counter.measure_message("user", [text_block(user)])
        + counter.measure_tools(COOKBOOK_TOOLS)
        + counter.request_overhead_tokens
    )
    assert total == COOKBOOK_TOOLS_TOKENS[encoding_name]


def test_service_tool_shape_counts_like_openai_shape(counter: TiktokenCounter) -> None:
    function = COOKBOOK_TOOLS[0]["function"]
    ours = {
        "name": function["name"],
        "description": function["description"],
        "input_schema": function["parameters"],
    }
    assert counter.measure_tools([ours]) == counter.measure_tools(COOKBOOK_TOOLS)
    assert counter.measure_tools([ours, ours]) > counter.measure_tools([ours])


def test_no_tools_cost_nothing(counter: TiktokenCounter) -> None:
    assert counter.measure_tools([]) == 0


def test_message_adds_framing_to_content(counter: TiktokenCounter) -> None:
    content: list[Block] = [text_block("Please list the files.")]
    for role in ("system", "user", "assistant", "tool"):
        # 3 framing tokens + the role, which is one token in both encodings.
        assert counter.measure_message(role, content) == counter.measure_content(content) + 4


def test_blocks_count_what_the_model_reads(counter: TiktokenCounter) -> None:
    args = '{"path": "src/main.py", "limit": 20}'
    call: Block = {"type": "tool_call", "id": "call_1", "name": "read_file", "input": args}
    assert counter.measure_content([call]) == counter.count_text("read_file") + counter.count_text(
        args
    )
    thinking: Block = {"type": "thinking", "thinking": "The user wants the file list."}
    assert counter.measure_content([thinking]) == counter.count_text(
        "The user wants the file list."
    )
    opaque: Block = {"type": "provider_opaque", "driver": "x", "kind": "sig", "payload": "abc" * 99}
    assert counter.measure_content([opaque]) == 0


def test_data_blocks_cost_the_documented_fixed_figure(counter: TiktokenCounter) -> None:
    # OpenAI's worked example: a 1024×1024 high-detail image costs 85 + 4 × 170 tokens.
    assert counter.measure_content([IMAGE]) == 765
    assert counter.measure_content([IMAGE, IMAGE]) == 2 * 765


def test_tool_result_counts_output_and_never_artifacts(counter: TiktokenCounter) -> None:
    result: ToolResultBlock = {
        "type": "tool_result",
        "id": "call_1",
        "name": "read_file",
        "output": [text_block("line one\nline two"), IMAGE],
        "state": "success",
    }
    with_artifacts: ToolResultBlock = {
        **result,
        "artifacts": [{"kind": "diff", "payload": {"text": "a huge diff " * 500}}],
    }
    expected = counter.count_text("line one\nline two") + 765
    assert counter.measure_content([result]) == expected
    assert counter.measure_content([with_artifacts]) == expected


def test_content_measure_is_additive(counter: TiktokenCounter) -> None:
    parts: list[Block] = [text_block(text) for text in CORPUS[1:5]]
    assert counter.measure_content(parts) == sum(counter.measure_content([p]) for p in parts)


def test_exact_counter_reports_tokens_as_measured(counter: TiktokenCounter) -> None:
    assert counter.tokens(12345) == 12345
    assert counter.request_overhead_tokens == 3


def test_built_encoding_matches_tiktokens_own(
    encoding_name: str, reference: tiktoken.Encoding
) -> None:
    ours = load_encoding(encoding_name)
    assert ours.name == reference.name
    assert ours.n_vocab == reference.n_vocab
    assert ours.special_tokens_set == reference.special_tokens_set
    assert ours._pat_str == reference._pat_str


def test_one_counter_shared_by_threads_counts_as_alone(counter: TiktokenCounter) -> None:
    texts = CORPUS * 20
    alone = [counter.count_text(text) for text in texts]
    with ThreadPoolExecutor(max_workers=8) as pool:
        shared = list(pool.map(counter.count_text, texts))
    assert shared == alone
