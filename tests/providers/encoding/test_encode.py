from __future__ import annotations

from typing import Any

import pytest

from app.providers.encoding import (
    PROTOCOLS,
    encode,
    encode_anthropic_messages,
    encode_openai_chat,
    encode_openai_responses,
)
from tests.providers.encoding.requests import agent_loop


@pytest.mark.parametrize(
    ("protocol", "direct"),
    [
        ("openai_chat", encode_openai_chat),
        ("anthropic_messages", encode_anthropic_messages),
        ("openai_responses", encode_openai_responses),
    ],
)
def test_dispatch_matches_the_protocol_encoder(protocol: Any, direct: Any) -> None:
    assert protocol in PROTOCOLS
    assert encode(agent_loop(), protocol, model="m", stream=True) == direct(
        agent_loop(), model="m", stream=True
    )


def test_unknown_protocol_is_refused() -> None:
    with pytest.raises(ValueError, match="gemini"):
        encode(agent_loop(), "gemini")  # type: ignore[arg-type]


def test_encoding_adds_no_text_that_the_request_lacks() -> None:
    # Every string value in the encoded bodies comes from the request (or is protocol vocabulary).
    request = agent_loop()
    for protocol in PROTOCOLS:
        body = encode(request, protocol)
        assert "Read a.py and b.py" in str(body)
        assert "You are terse." in str(body)
        assert str(body).count("<sandbox_policy>") == 1
