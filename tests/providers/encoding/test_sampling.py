"""The caller's sampling fields written in each provider protocol (spec §21.3), read in each
caller protocol: what is translated, what is dropped, and where it goes in the body."""

from __future__ import annotations

from typing import Any

import pytest

import app.providers.encoding.wire as wire
from app.api.compat._sampling import read
from app.core.caching.breakpoints import CachePlan
from app.core.errors import InvalidInput
from app.providers.encoding.sampling import Sampling, sampling_fields
from tests.providers.encoding.requests import agent_loop

PLAN = CachePlan(True, True, (1,), "ctxsvc-00112233445566ff")
CHAT = {
    "temperature": 0.2,
    "top_p": 0.9,
    "stop": "END",
    "tool_choice": {"type": "function", "function": {"name": "read"}},
    "parallel_tool_calls": False,
    "seed": 3,
}


def test_chat_fields_in_each_provider_protocol() -> None:
    sampling = read(CHAT, "openai_chat")
    assert sampling_fields(sampling, "openai_chat", has_tools=True) == {
        **CHAT,
        "stop": ["END"],
    }
    # Responses: no stop, no seed; its own shape of a named function.
    assert sampling_fields(sampling, "openai_responses", has_tools=True) == {
        "temperature": 0.2,
        "top_p": 0.9,
        "tool_choice": {"type": "function", "name": "read"},
        "parallel_tool_calls": False,
    }
    assert sampling_fields(sampling, "anthropic_messages", has_tools=True) == {
        "temperature": 0.2,
        "top_p": 0.9,
        "stop_sequences": ["END"],
        "tool_choice": {"type": "tool", "name": "read", "disable_parallel_tool_use": True},
    }
    # Without tools, no tool field (OpenAI refuses them); a scripted model has no body.
    assert "tool_choice" not in sampling_fields(sampling, "openai_chat", has_tools=False)
    assert sampling_fields(sampling, "scripted", has_tools=True) == {}


@pytest.mark.parametrize(
    ("choice", "chat", "anthropic"),
    [
        ({"type": "auto"}, "auto", {"type": "auto"}),
        ({"type": "any"}, "required", {"type": "any"}),
        ({"type": "none"}, "none", {"type": "none"}),
        (
            {"type": "auto", "disable_parallel_tool_use": True},
            "auto",
            {"type": "auto", "disable_parallel_tool_use": True},
        ),
    ],
)
def test_anthropic_tool_choice_both_ways(choice: Any, chat: Any, anthropic: Any) -> None:
    sampling = read({"tool_choice": choice}, "anthropic_messages")
    assert sampling_fields(sampling, "openai_chat", has_tools=True)["tool_choice"] == chat
    assert sampling_fields(sampling, "anthropic_messages", has_tools=True) == {
        "tool_choice": anthropic
    }


def test_responses_callers_fields_and_what_has_no_equivalent() -> None:
    sampling = read(
        {"tool_choice": "required", "stop": ["x"], "seed": 1, "top_k": 4}, "openai_responses"
    )
    # Responses requests have no stop or seed: never read; top_k is no sampling field here.
    assert sampling == Sampling(tool_choice="required")
    allowed = {"type": "allowed_tools", "mode": "auto", "tools": []}
    assert read({"tool_choice": allowed}, "openai_responses") == Sampling()
    assert read({"temperature": None, "stop": None}, "openai_chat") == Sampling()


@pytest.mark.parametrize(
    ("params", "protocol", "field"),
    [
        ({"temperature": "0"}, "openai_chat", "temperature"),
        ({"temperature": True}, "openai_chat", "temperature"),
        ({"temperature": 2.5}, "openai_responses", "temperature"),
        ({"top_p": 1.5}, "anthropic_messages", "top_p"),
        ({"stop": [1]}, "openai_chat", "stop"),
        ({"stop_sequences": "END"}, "anthropic_messages", "stop_sequences"),
        ({"tool_choice": "always"}, "openai_chat", "tool_choice"),
        ({"tool_choice": {"type": "function"}}, "openai_chat", "tool_choice.function.name"),
        ({"tool_choice": "auto"}, "anthropic_messages", "tool_choice"),
        ({"tool_choice": {"type": "tool"}}, "anthropic_messages", "tool_choice.name"),
        ({"parallel_tool_calls": "no"}, "openai_responses", "parallel_tool_calls"),
        ({"seed": 1.5}, "openai_chat", "seed"),
    ],
)
def test_invalid_values_are_refused_naming_the_field(
    params: dict[str, Any], protocol: str, field: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        read(params, protocol)
    assert refused.value.code == "invalid_sampling"
    assert refused.value.detail.startswith(field + " ")


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (wire.openai_chat_body, "openai_chat"),
        (wire.openai_responses_body, "openai_responses"),
        (wire.anthropic_messages_body, "anthropic_messages"),
    ],
)
def test_the_fields_follow_the_body_byte_for_byte(body: Any, kind: str) -> None:
    request = agent_loop()
    fields = sampling_fields(read(CHAT, "openai_chat"), kind, has_tools=True)
    plain = body(request, model="m", stream=True, caching=PLAN)
    extended = body({**request, "extra": fields}, model="m", stream=True, caching=PLAN)
    # The body without them, its closing brace replaced by the fields: nothing before moves.
    assert extended == plain[:-1] + b"," + wire.dumps(fields)[1:]
    assert extended == body(
        {**request, "extra": dict(fields)}, model="m", stream=True, caching=PLAN
    )
