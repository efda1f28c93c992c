"""What one stored message may hold: no single item may make a session unrecoverable.

The store is append only, so a message accepted once is in every later read of its session.
Two limits bound what a caller may store, each refused with ``message_too_large`` naming the
message, its size and the limit:

- ``MAX_MESSAGE_BYTES``: the UTF-8 bytes of a message's compact content JSON (artifacts
  excluded: the estimate's measure, ``StoredMessage.content_bytes``), for every message a caller
  sends (appends, a turn's input, tool results);
- a user or assistant message may need at most the session model's whole input room
  (``effective_input_tokens``), by the model's counter: such a message could never be sent.

A model's answer is never refused (the provider already produced it): its text and thinking are
cut to ``answer_text_cap`` bytes — generous for what ``max_output_tokens`` lets a model write,
never over ``MAX_ANSWER_TEXT_BYTES`` — and marked (``cut_answer_text``); its tool calls keep
the free-form JSON limit (``app.services.turns.answers``).
"""

from __future__ import annotations

from typing import Any

from app.core.capabilities import SUMMARY_MAX_OUTPUT_TOKENS
from app.core.errors import InvalidInput

__all__ = [
    "ANSWER_BYTES_PER_TOKEN",
    "MAX_ANSWER_TEXT_BYTES",
    "MAX_MESSAGE_BYTES",
    "MAX_POSTED_SUMMARY_CHARS",
    "answer_text_cap",
    "check_message_bytes",
    "check_message_tokens",
    "cut_answer_text",
]

# 4 MiB: about a million estimated tokens (more than any model's whole window), room for a
# tool call or a payload at the 1 MiB free-form JSON limit (``json_limits``) with the rest of
# its message, and for a tool result read from a large file (projected to its share when sent).
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
# Bytes a model's answer text (or thinking) may take per output token before it is cut: four
# times the estimate's 4, so that no answer a provider could send within its limit is cut...
ANSWER_BYTES_PER_TOKEN = 16
# ...and at most 1 MiB whatever the limit (128 000 output tokens are about 512 000 bytes).
MAX_ANSWER_TEXT_BYTES = 1_048_576
# Characters of a summary a caller's own model wrote (bring-your-own-model compaction): what
# the summary request's output limit lets a model write (a longer one is refused by the schema).
MAX_POSTED_SUMMARY_CHARS = ANSWER_BYTES_PER_TOKEN * SUMMARY_MAX_OUTPUT_TOKENS


def _too_large(
    where: str, size: int, cap: int, unit: str, advice: str, extra: dict[str, Any]
) -> InvalidInput:
    return InvalidInput(
        "message_too_large",
        f"{where} is {size} {unit}, over the {cap}-{unit[:-1]} limit of one message; {advice}",
        unit=unit,
        size=size,
        cap=cap,
        **extra,
    )


def check_message_bytes(where: str, content_bytes: int, **extra: Any) -> None:
    """Refuse a message whose content JSON is over ``MAX_MESSAGE_BYTES``; ``where`` names it in
    the detail (``message 2``, ``the turn's input``), ``extra`` in the problem (``index``)."""
    if content_bytes > MAX_MESSAGE_BYTES:
        advice = "split it, or send large data as a file the agent reads with a tool"
        raise _too_large(where, content_bytes, MAX_MESSAGE_BYTES, "bytes", advice, extra)


def check_message_tokens(
    where: str, tokens: int, effective_input_tokens: int, **extra: Any
) -> None:
    """Refuse a message that alone needs more than the model's whole input room."""
    if tokens > effective_input_tokens:
        advice = (
            "no request of the session's model could hold it (its effective input tokens); "
            "split it or use a model with a larger window"
        )
        raise _too_large(where, tokens, effective_input_tokens, "tokens", advice, extra)


def answer_text_cap(max_output_tokens: int, max_reasoning_tokens: int | None) -> int:
    """UTF-8 bytes a model's answer text (or thinking) may take before it is cut."""
    allowed = ANSWER_BYTES_PER_TOKEN * (max_output_tokens + (max_reasoning_tokens or 0))
    return min(MAX_ANSWER_TEXT_BYTES, allowed)


def cut_answer_text(text: str, cap_bytes: int, max_output_tokens: int) -> str:
    """``text`` itself when within ``cap_bytes``; else its head within the cap, on a character
    boundary, followed by a marker saying how much was cut and why."""
    if len(text) * 4 <= cap_bytes:  # a character is at most 4 bytes: the usual answer
        return text
    raw = text.encode("utf-8", "surrogatepass")
    if len(raw) <= cap_bytes:
        return text
    marker = (
        f"\n...[model answer cut: the provider sent {len(raw)} bytes, more than "
        f"max_output_tokens {max_output_tokens} allows; {{omitted}} bytes omitted]"
    )
    keep = max(0, cap_bytes - len(marker) - 16)  # room for the omitted count's digits
    while keep > 0 and (raw[keep] & 0xC0) == 0x80:  # never split a UTF-8 sequence
        keep -= 1
    head = raw[:keep].decode("utf-8", "surrogatepass")
    return head + marker.format(omitted=len(raw) - keep)
