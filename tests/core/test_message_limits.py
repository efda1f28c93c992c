"""The limits of one stored message (``app.core.limits.messages``): equal to a limit passes,
one over is refused or cut."""

from __future__ import annotations

import pytest

from app.core.errors import InvalidInput
from app.core.limits.messages import (
    MAX_ANSWER_TEXT_BYTES,
    MAX_MESSAGE_BYTES,
    answer_text_cap,
    check_message_bytes,
    check_message_tokens,
    cut_answer_text,
)


def test_a_message_at_the_byte_limit_passes_and_one_byte_over_is_refused() -> None:
    check_message_bytes("message 0", MAX_MESSAGE_BYTES)
    with pytest.raises(InvalidInput) as refused:
        check_message_bytes("message 3", MAX_MESSAGE_BYTES + 1, index=3)
    assert refused.value.code == "message_too_large"
    assert refused.value.extra == {
        "unit": "bytes",
        "size": MAX_MESSAGE_BYTES + 1,
        "cap": MAX_MESSAGE_BYTES,
        "index": 3,
    }
    assert refused.value.detail.startswith("message 3 is 4194305 bytes, over the 4194304-byte")


def test_a_message_at_the_models_input_room_passes_and_one_token_over_is_refused() -> None:
    check_message_tokens("the turn's input", 600, 600)
    with pytest.raises(InvalidInput) as refused:
        check_message_tokens("the turn's input", 601, 600)
    assert refused.value.detail.startswith("the turn's input is 601 tokens, over the 600-token")


def test_an_answer_is_cut_only_past_its_cap_and_never_past_it_after() -> None:
    cap = answer_text_cap(1000, None)
    assert cap == 16_000
    assert answer_text_cap(10**6, 10**6) == MAX_ANSWER_TEXT_BYTES
    at_cap = "é" * (cap // 2)  # two bytes each
    assert cut_answer_text(at_cap, cap, 1000) is at_cap
    cut = cut_answer_text(at_cap + "é", cap, 1000)
    assert len(cut.encode()) <= cap
    head, marker = cut.split("\n...", 1)
    assert set(head) == {"é"}  # cut on a character boundary
    omitted = len((at_cap + "é").encode()) - len(head.encode())
    assert marker == (
        f"[model answer cut: the provider sent {cap + 2} bytes, more than max_output_tokens "
        f"1000 allows; {omitted} bytes omitted]"
    )
