"""``/v1/sessions/{id}/turns``: start, read, feed tool results to and cancel turns."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from app.api.deps import ContainerDep
from app.api.jsonresponse import json_response
from app.api.problems import PROBLEM_RESPONSES
from app.api.schemas.turns import ToolResultsBody, ToolResultsOut, TurnOut, TurnPage, TurnStart

router = APIRouter(
    prefix="/v1/sessions/{session_id}/turns",
    tags=["turns"],
    responses=PROBLEM_RESPONSES,
)

SessionId = Annotated[str, Path(min_length=1, max_length=200)]
TurnId = Annotated[str, Path(min_length=1, max_length=200)]
Wait = Annotated[
    bool,
    Query(description="Answer when the turn is terminal or waits for tool results (bounded)."),
]


@router.post("", status_code=202, response_model=TurnOut, responses={200: {"model": TurnOut}})
async def start_turn(
    session_id: SessionId, body: TurnStart, container: ContainerDep, wait: Wait = False
) -> Response:
    """Start a turn (202), or return the turn already accepted for this client_request_id (200)."""
    turn, created = await container.turns.start(
        session_id,
        client_request_id=body.client_request_id,
        input_items=[i.model_dump() for i in body.input],
        wait=wait,
    )
    return json_response(turn, status_code=202 if created else 200)


@router.get("", response_model=TurnPage)
async def list_turns(
    session_id: SessionId,
    container: ContainerDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(description="`next_cursor` of the previous page")] = None,
) -> Response:
    """The session's turns, newest first, cursor-paginated."""
    return json_response(await container.turns.list(session_id, limit=limit, cursor=cursor))


@router.get("/{turn_id}", response_model=TurnOut)
async def get_turn(
    session_id: SessionId, turn_id: TurnId, container: ContainerDep, wait: Wait = False
) -> Response:
    """Status, phase, outcome, pending tool calls, plan and token usage of a turn."""
    if wait:
        return json_response(await container.turns.wait(session_id, turn_id))
    return json_response(await container.turns.get(session_id, turn_id))


@router.post("/{turn_id}/tool-results", response_model=ToolResultsOut)
async def post_tool_results(
    session_id: SessionId,
    turn_id: TurnId,
    body: ToolResultsBody,
    container: ContainerDep,
    wait: Wait = False,
) -> Response:
    """Results of caller-executed tool calls; the turn resumes once every call has one."""
    results = [r.model_dump() for r in body.results]
    return json_response(
        await container.turns.post_tool_results(session_id, turn_id, results, wait=wait)
    )


@router.post("/{turn_id}/cancel", response_model=TurnOut)
async def cancel_turn(session_id: SessionId, turn_id: TurnId, container: ContainerDep) -> Response:
    """Cancel the running turn; answers once it is terminal (bounded wait)."""
    return json_response(await container.turns.cancel(session_id, turn_id))
