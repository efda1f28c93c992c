"""A session's pins: facts, constraints and decisions sent verbatim in every request, and the
constraints the service proposes from user messages (``/v1/sessions/{id}/pins``): the typed
answers and the operations as ``Call``s."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from ctxsvc_client._callkit import model_of, session_path
from ctxsvc_client._calls import Call
from ctxsvc_client._models import _Result

__all__ = [
    "Pin",
    "PinKind",
    "PinLimits",
    "PinList",
    "PinProposal",
    "PinProposalPage",
    "accept_pin_proposal",
    "create_pin",
    "dismiss_pin_proposal",
    "get_pin",
    "list_pin_proposals",
    "list_pins",
    "remove_pin",
    "replace_pin",
]

PinKind = Literal["constraint", "decision", "fact"]


class Pin(_Result):
    pin_id: str
    kind: str
    text: str
    bytes: int
    position: int
    proposal_id: str | None = None
    created_at: datetime
    updated_at: datetime


class PinLimits(_Result):
    max_pins: int
    max_pin_bytes: int
    max_total_bytes: int
    max_open_proposals: int


class PinList(_Result):
    pins: list[Pin]
    total_bytes: int
    limits: PinLimits
    open_proposals: int


class PinProposal(_Result):
    proposal_id: str
    text: str
    status: str
    message_id: str
    message_sequence: int
    pin_id: str | None = None
    created_at: datetime
    decided_at: datetime | None = None


class PinProposalPage(_Result):
    proposals: list[PinProposal]


def _pins(session_id: str, *rest: str) -> str:
    return session_path(session_id, "pins", *rest)


def list_pins(session_id: str) -> Call[PinList]:
    """The session's pins in their order, their total size and the limits."""
    return Call("GET", _pins(session_id), model_of(PinList), idempotent=True)


def create_pin(session_id: str, *, kind: PinKind, text: str) -> Call[Pin]:
    """Pin ``text`` verbatim: in every request from the next model call on."""
    body = {"kind": kind, "text": text}
    # Not repeated on a dropped connection: a second pin of the same text is refused anyway.
    return Call("POST", _pins(session_id), model_of(Pin), json=body)


def get_pin(session_id: str, pin_id: str) -> Call[Pin]:
    return Call("GET", _pins(session_id, pin_id), model_of(Pin), idempotent=True)


def replace_pin(session_id: str, pin_id: str, *, kind: PinKind, text: str) -> Call[Pin]:
    """Replace a pin's kind and text (it keeps its id and place)."""
    body = {"kind": kind, "text": text}
    return Call("PUT", _pins(session_id, pin_id), model_of(Pin), json=body, idempotent=True)


def remove_pin(session_id: str, pin_id: str) -> Call[None]:
    return Call("DELETE", _pins(session_id, pin_id), lambda r: None)


def list_pin_proposals(
    session_id: str,
    *,
    status: Literal["open", "accepted", "dismissed", "all"] = "open",
    limit: int | None = None,
) -> Call[PinProposalPage]:
    """Constraints the service recognized in user messages, newest first (``open`` ones by
    default): not in any request until accepted."""
    params: dict[str, str] = {"status": status}
    if limit is not None:
        params["limit"] = str(limit)
    url = _pins(session_id, "proposals")
    return Call("GET", url, model_of(PinProposalPage), params=params, idempotent=True)


def accept_pin_proposal(session_id: str, proposal_id: str) -> Call[Pin]:
    """Pin an open proposal's text as a constraint; the new pin."""
    return Call("POST", _pins(session_id, "proposals", proposal_id, "accept"), model_of(Pin))


def dismiss_pin_proposal(session_id: str, proposal_id: str) -> Call[PinProposal]:
    """Dismiss an open proposal: the same sentence is never proposed again."""
    url = _pins(session_id, "proposals", proposal_id, "dismiss")
    return Call("POST", url, model_of(PinProposal))
