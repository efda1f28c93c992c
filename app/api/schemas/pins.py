"""A session's pins and pin proposals (``app.core.pins``; docs/api-notes.md, Pins)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from app.api.schemas.fields import RequestModel
from app.api.schemas.shapes import NOT_BLANK
from app.core.pins import MAX_OPEN_PROPOSALS, MAX_PIN_BYTES, MAX_PINNED_BYTES, MAX_PINS, PinKind

__all__ = [
    "PinBody",
    "PinLimitsOut",
    "PinListOut",
    "PinOut",
    "ProposalListOut",
    "ProposalOut",
    "ProposalStatusFilter",
]

ProposalStatusFilter = Literal["open", "accepted", "dismissed", "all"]


class PinBody(RequestModel):
    """A pin to create, or what replaces a pin."""

    kind: PinKind = Field(
        description="`constraint` (what must or must not be done), `decision` (what was "
        "chosen) or `fact` (what is so); the section groups pins by kind.",
        examples=["constraint"],
    )
    text: str = Field(
        min_length=1,
        # Characters: at most as many as bytes; the byte limit is the service's own check.
        max_length=MAX_PIN_BYTES,
        pattern=NOT_BLANK,
        description=f"Sent verbatim in every request. At most {MAX_PIN_BYTES} bytes of UTF-8 "
        "(422 `pin_too_large`); no control tag such as `<system_reminder>` or "
        "`</pinned_context>` (422 `invalid_pin_text`).",
        examples=["Never modify anything in the production database."],
    )


class PinOut(BaseModel):
    pin_id: str
    kind: PinKind
    text: str
    bytes: int = Field(description="UTF-8 bytes of `text`: what it counts against the limits.")
    position: int = Field(
        description="Its place among the session's pins (a replaced pin keeps it)."
    )
    proposal_id: str | None = Field(
        description="The proposal it was accepted from; null when the caller pinned it."
    )
    created_at: datetime
    updated_at: datetime


class PinLimitsOut(BaseModel):
    max_pins: int = Field(examples=[MAX_PINS])
    max_pin_bytes: int = Field(examples=[MAX_PIN_BYTES])
    max_total_bytes: int = Field(examples=[MAX_PINNED_BYTES])
    max_open_proposals: int = Field(examples=[MAX_OPEN_PROPOSALS])


class PinListOut(BaseModel):
    pins: list[PinOut] = Field(description="In their order.")
    total_bytes: int
    limits: PinLimitsOut
    open_proposals: int = Field(description="Proposals waiting to be accepted or dismissed.")


class ProposalOut(BaseModel):
    proposal_id: str
    text: str = Field(description="The sentence of the user's message, verbatim.")
    status: Literal["open", "accepted", "dismissed"]
    message_id: str = Field(description="The user message it was recognized in.")
    message_sequence: int
    pin_id: str | None = Field(description="The pin an accepted proposal became.")
    created_at: datetime
    decided_at: datetime | None


class ProposalListOut(BaseModel):
    proposals: list[ProposalOut] = Field(
        description="Newest first: by the message they were found in, then in its order."
    )
