"""``/v1/sessions/{id}/pins``: pin facts, constraints and decisions on a session; answer the pins
the service proposes from user messages (``app.core.pins``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path, Query
from fastapi.responses import Response
from starlette.convertors import StringConvertor, register_url_convertor

from app.api import examples
from app.api.deps import ContainerDep
from app.api.responses import SESSION, Codes, problems
from app.api.schemas.pins import (
    PinBody,
    PinLimitsOut,
    PinListOut,
    PinOut,
    ProposalListOut,
    ProposalOut,
    ProposalStatusFilter,
)
from app.core.pins import MAX_OPEN_PROPOSALS, MAX_PIN_BYTES, MAX_PINNED_BYTES, MAX_PINS

router = APIRouter(prefix="/v1/sessions/{session_id}/pins", tags=["pins"])


class _PinIdConvertor(StringConvertor):
    """A path segment that names a pin: anything but ``proposals``, the collection beside the
    pins, so that ``/pins/proposals`` matches its own routes only (its ``Allow`` lists GET, and
    a PUT there is 405, not a look-up of a pin called "proposals")."""

    regex = "(?!proposals(?:/|$))[^/]+"


register_url_convertor("pin_id", _PinIdConvertor())

SessionId = Annotated[str, Path(min_length=1, max_length=200)]
PinId = Annotated[str, Path(min_length=1, max_length=200)]
ProposalId = Annotated[str, Path(min_length=1, max_length=200)]

_PIN: Codes = {404: ("pin_not_found",)}
_PROPOSAL: Codes = {404: ("pin_proposal_not_found",)}
# A new or replaced text: its own rules, then the session's (another pin has it; the limits).
_TEXT: Codes = {
    422: ("pin_too_large", "invalid_pin_text"),
    409: ("duplicate_pin", "pin_limit_reached"),
}
_LIMITS = PinLimitsOut(
    max_pins=MAX_PINS,
    max_pin_bytes=MAX_PIN_BYTES,
    max_total_bytes=MAX_PINNED_BYTES,
    max_open_proposals=MAX_OPEN_PROPOSALS,
)


@router.get("", response_model=PinListOut, responses=problems(SESSION))
async def list_pins(session_id: SessionId, container: ContainerDep) -> PinListOut:
    """The session's pins in their order, their total size and the limits."""
    listed = await container.pins.pins(session_id)
    return PinListOut(
        pins=[PinOut.model_validate(pin, from_attributes=True) for pin in listed.pins],
        total_bytes=listed.total_bytes,
        limits=_LIMITS,
        open_proposals=listed.open_proposals,
    )


@router.post(
    "", status_code=201, response_model=PinOut, responses=problems(SESSION, _TEXT, body=True)
)
async def create_pin(
    session_id: SessionId,
    body: Annotated[PinBody, Body(openapi_examples=examples.PIN)],
    container: ContainerDep,
) -> PinOut:
    """Pin a fact, constraint or decision: from the next model call on, in every request."""
    pin = await container.pins.create(session_id, body.kind, body.text)
    return PinOut.model_validate(pin, from_attributes=True)


@router.get("/proposals", response_model=ProposalListOut, responses=problems(SESSION))
async def list_pin_proposals(
    session_id: SessionId,
    container: ContainerDep,
    status: Annotated[
        ProposalStatusFilter, Query(description="Which proposals; `all` for every status.")
    ] = "open",
    limit: Annotated[int, Query(ge=1, le=MAX_OPEN_PROPOSALS)] = MAX_OPEN_PROPOSALS,
) -> ProposalListOut:
    """Constraints the service recognized in user messages, proposed as pins (newest first)."""
    proposals = await container.pins.proposals(
        session_id, None if status == "all" else status, limit=limit
    )
    return ProposalListOut(
        proposals=[ProposalOut.model_validate(p, from_attributes=True) for p in proposals]
    )


@router.post(
    "/proposals/{proposal_id}/accept",
    status_code=201,
    response_model=PinOut,
    responses=problems(
        SESSION,
        _PROPOSAL,
        {409: ("pin_proposal_not_open", "duplicate_pin", "pin_limit_reached")},
    ),
)
async def accept_pin_proposal(
    session_id: SessionId, proposal_id: ProposalId, container: ContainerDep
) -> PinOut:
    """Pin an open proposal's text verbatim as a constraint; answers the new pin."""
    pin = await container.pins.accept(session_id, proposal_id)
    return PinOut.model_validate(pin, from_attributes=True)


@router.post(
    "/proposals/{proposal_id}/dismiss",
    response_model=ProposalOut,
    responses=problems(SESSION, _PROPOSAL, {409: ("pin_proposal_not_open",)}),
)
async def dismiss_pin_proposal(
    session_id: SessionId, proposal_id: ProposalId, container: ContainerDep
) -> ProposalOut:
    """Dismiss an open proposal: it is never proposed again."""
    proposal = await container.pins.dismiss(session_id, proposal_id)
    return ProposalOut.model_validate(proposal, from_attributes=True)


@router.get("/{pin_id:pin_id}", response_model=PinOut, responses=problems(SESSION, _PIN))
async def get_pin(session_id: SessionId, pin_id: PinId, container: ContainerDep) -> PinOut:
    """One pin."""
    return PinOut.model_validate(await container.pins.get(session_id, pin_id), from_attributes=True)


@router.put(
    "/{pin_id:pin_id}", response_model=PinOut, responses=problems(SESSION, _PIN, _TEXT, body=True)
)
async def replace_pin(
    session_id: SessionId,
    pin_id: PinId,
    body: Annotated[PinBody, Body(openapi_examples=examples.PIN)],
    container: ContainerDep,
) -> PinOut:
    """Replace a pin's kind and text; it keeps its id and place."""
    pin = await container.pins.replace(session_id, pin_id, body.kind, body.text)
    return PinOut.model_validate(pin, from_attributes=True)


@router.delete("/{pin_id:pin_id}", status_code=204, responses=problems(SESSION, _PIN))
async def remove_pin(session_id: SessionId, pin_id: PinId, container: ContainerDep) -> Response:
    """Remove a pin: the next model call is told it no longer applies."""
    await container.pins.remove(session_id, pin_id)
    return Response(status_code=204)
