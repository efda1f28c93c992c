"""Pins: facts, constraints and decisions pinned on a session, in every request verbatim.

A pin is session state, not conversation: the caller (or the user, through the caller) pins it,
replaces it or removes it, and it is sent as the World State section ``session/pins``
(``PINNED_CONTEXT`` in ``app.core.world_state.sections``) — appended like every section, sent
again in full after every compaction and rewind, never part of a summary, never evicted by a
cap. Nothing here reads the database: the service stores the pins and hands them over.

- ``check_pin_text``: what a pin may say (its own limit in bytes, no control tag).
- ``check_session_totals``: the limits of a session's pins together.
- ``render_pins``: the section body, byte-stable for the same pins.
- ``proposed_constraints``: the sentences of a user's message that the offline summarizer's
  constraint rule recognizes, as proposals the caller may accept or dismiss.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from app.core.compaction._local_text import is_constraint
from app.core.compaction.validation import find_control_tag
from app.core.errors import Conflict, InvalidInput

__all__ = [
    "MAX_OPEN_PROPOSALS",
    "MAX_PINNED_BYTES",
    "MAX_PINS",
    "MAX_PIN_BYTES",
    "MAX_PROPOSALS_PER_MESSAGE",
    "PINNED_CONTEXT_OPEN",
    "PIN_KINDS",
    "Pin",
    "PinKind",
    "check_pin_text",
    "check_session_totals",
    "pin_bytes",
    "proposed_constraints",
    "render_pins",
]

PinKind: TypeAlias = Literal["constraint", "decision", "fact"]
# Also the order of the section's groups: what the model must not do first.
PIN_KINDS: Final[tuple[PinKind, ...]] = ("constraint", "decision", "fact")

# One pin: a rule or a fact, not a document (≈ 1 024 tokens by the estimate).
MAX_PIN_BYTES = 4096
# A session's pins together: what every request carries (≈ 4 096 tokens by the estimate).
MAX_PINS = 64
MAX_PINNED_BYTES = 16_384
# Proposals waiting for the caller's answer, and taken from one message.
MAX_OPEN_PROPOSALS = 100
MAX_PROPOSALS_PER_MESSAGE = 8

PINNED_CONTEXT_OPEN = '<pinned_context format_version="1">'
_PINNED_CONTEXT_CLOSE = "</pinned_context>"
_PREAMBLE = (
    "The user or the application pinned these items on this session. Each holds until it is "
    "removed: after any compaction, and over anything a summary or an earlier message says."
)
_HEADINGS: Final[dict[PinKind, str]] = {
    "constraint": "## Constraints",
    "decision": "## Decisions",
    "fact": "## Facts",
}
# The section's own tags, beside the control tags a summary may not contain (spec §7.4).
_OWN_TAGS = ("<pinned_context", "</pinned_context")


@dataclass(frozen=True, slots=True)
class Pin:
    kind: PinKind
    text: str


def pin_bytes(text: str) -> int:
    """What a pin counts against the limits: its UTF-8 bytes."""
    return len(text.encode("utf-8"))


def _control_tag(text: str) -> str | None:
    lowered = text.lower()
    own = next((tag for tag in _OWN_TAGS if tag in lowered), None)
    return own or find_control_tag(text)


def check_pin_text(text: str) -> str:
    """``text`` as it will be pinned, or ``InvalidInput``: ``invalid_pin_text`` (blank, or a
    control tag that could close the section or pose as the service's own message) or
    ``pin_too_large`` (over ``MAX_PIN_BYTES``). Kept verbatim: nothing is trimmed."""
    if not text.strip():
        raise InvalidInput("invalid_pin_text", "a pin's text must not be blank")
    size = pin_bytes(text)
    if size > MAX_PIN_BYTES:
        raise InvalidInput(
            "pin_too_large",
            f"the pin's text is {size} bytes (UTF-8), over the limit of {MAX_PIN_BYTES}; pin "
            "the rule itself, or split it into several pins",
            bytes=size,
            limit=MAX_PIN_BYTES,
        )
    tag = _control_tag(text)
    if tag is not None:
        raise InvalidInput(
            "invalid_pin_text",
            f"a pin must not contain the control tag {tag!r}: pins are sent inside the "
            "service's own pinned-context section; write the rule without markup tags",
            tag=tag,
        )
    return text


def check_session_totals(count: int, total_bytes: int) -> None:
    """``Conflict`` (``pin_limit_reached``) when a session's pins, as they would be after a
    change, exceed ``MAX_PINS`` or ``MAX_PINNED_BYTES``."""
    if count > MAX_PINS:
        raise Conflict(
            "pin_limit_reached",
            f"the session would have {count} pins, over the limit of {MAX_PINS}; remove or "
            "merge pins first",
            pins=count,
            limit=MAX_PINS,
        )
    if total_bytes > MAX_PINNED_BYTES:
        raise Conflict(
            "pin_limit_reached",
            f"the session's pins would hold {total_bytes} bytes (UTF-8), over the limit of "
            f"{MAX_PINNED_BYTES}; remove or shorten pins first",
            bytes=total_bytes,
            limit=MAX_PINNED_BYTES,
        )


def render_pins(pins: Sequence[Pin]) -> str | None:
    """The ``session/pins`` section body; ``None`` without pins (the section is absent).

    Grouped by kind (constraints, decisions, facts), each group in the order given; each pin a
    bullet with its text verbatim, a line break inside it continued with two spaces so that
    the bullet stays one item.
    """
    if not pins:
        return None
    lines = [PINNED_CONTEXT_OPEN, _PREAMBLE]
    for kind in PIN_KINDS:
        group = [pin.text for pin in pins if pin.kind == kind]
        if group:
            lines.append(_HEADINGS[kind])
            lines.extend("- " + text.replace("\n", "\n  ") for text in group)
    lines.append(_PINNED_CONTEXT_CLOSE)
    return "\n".join(lines)


# Sentence ends: ``.!?`` before whitespace, their CJK forms wherever they are (CJK text has no
# space after them), and line breaks.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？])|\n+")
_BULLET = re.compile(r"^(?:[-*•]|\d{1,3}[.)])\s+")


def _recognized(text: str) -> bool:
    # The one place pins depend on the offline summarizer's constraint rule.
    return is_constraint(text)


def proposed_constraints(text: str) -> list[str]:
    """The sentences of ``text`` (a user's message) to propose as constraint pins.

    A sentence is proposed when the offline summarizer's constraint rule recognizes it; each
    verbatim but for surrounding whitespace and a list bullet, each once, in order, at most
    ``MAX_PROPOSALS_PER_MESSAGE``, and only what could be pinned as it is (within
    ``MAX_PIN_BYTES``, no control tag). The rule reads words, so a message it does not
    recognize as a whole holds no sentence it would: most messages cost one search.
    """
    if not _recognized(text):
        return []
    proposed: list[str] = []
    for raw in _SENTENCE_END.split(text):
        sentence = _BULLET.sub("", raw.strip())
        if not sentence or sentence in proposed or not _recognized(sentence):
            continue
        if pin_bytes(sentence) > MAX_PIN_BYTES or _control_tag(sentence) is not None:
            continue
        proposed.append(sentence)
        if len(proposed) == MAX_PROPOSALS_PER_MESSAGE:
            break
    return proposed
