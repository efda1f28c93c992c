"""``/v1/sessions/{id}/turns``: start, read, feed tool results to and cancel turns."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path, Query
from fastapi.responses import Response

from app.api import examples
from app.api.deps import ContainerDep
from app.api.jsonresponse import json_response
from app.api.render.turns import tool_results_json, turn_json, turn_page_json
from app.api.responses import (
    MODEL,
    SEQUENCES,
    SESSION,
    SESSION_CONFIG,
    WORLD_STATE,
    Codes,
    problems,
)
from app.api.schemas.turns import ToolResultsBody, ToolResultsOut, TurnOut, TurnPage, TurnStart
from app.services.cursors import TURN_CURSOR

router = APIRouter(prefix="/v1/sessions/{session_id}/turns", tags=["turns"])

_TURN: Codes = {404: ("session_not_found", "turn_not_found")}

SessionId = Annotated[str, Path(min_length=1, max_length=200)]
TurnId = Annotated[str, Path(min_length=1, max_length=200)]
Wait = Annotated[
    bool,
    Query(description="Answer when the turn is terminal or waits for tool results (bounded)."),
]


@router.post(
    "",
    status_code=202,
    response_model=TurnOut,
    responses={
        200: {"model": TurnOut, "description": "The turn already accepted for this id"},
        **problems(
            SESSION,
            SESSION_CONFIG,
            SEQUENCES,
            MODEL,
            WORLD_STATE,
            {
                409: ("busy", "reload_required"),
                422: (
                    "empty_input",
                    "message_too_large",
                    "client_request_id_reused",
                    "skill_unavailable",
                    "skill_too_large",
                ),
                503: ("shutting_down",),  # this replica is stopping: send it again
            },
            body=True,
        ),
    },
)
async def start_turn(
    session_id: SessionId,
    body: Annotated[TurnStart, Body(openapi_examples=examples.TURN_START)],
    container: ContainerDep,
    wait: Wait = False,
) -> Response:
    """Start a turn (202), or return the one accepted for this client_request_id and input (200)."""
    started = await container.turns.start(session_id, body, wait=wait)
    return json_response(turn_json(started.turn), status_code=202 if started.created else 200)


@router.get("", response_model=TurnPage, responses=problems(SESSION, {422: ("invalid_cursor",)}))
async def list_turns(
    session_id: SessionId,
    container: ContainerDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[
        str,
        # The service's own check answers (``invalid_cursor``); the schema states it.
        Query(
            json_schema_extra={"pattern": TURN_CURSOR.pattern},
            description="`next_cursor` of the previous page",
        ),
    ] = "",
) -> Response:
    """The session's turns, newest first, cursor-paginated."""
    page = await container.turns.list(session_id, limit=limit, cursor=cursor or None)
    return json_response(turn_page_json(page))


@router.get("/{turn_id}", response_model=TurnOut, responses=problems(_TURN))
async def get_turn(
    session_id: SessionId, turn_id: TurnId, container: ContainerDep, wait: Wait = False
) -> Response:
    """Status, phase, outcome, pending tool calls, plan and token usage of a turn."""
    if wait:
        return json_response(turn_json(await container.turns.wait(session_id, turn_id)))
    return json_response(turn_json(await container.turns.get(session_id, turn_id)))


@router.post(
    "/{turn_id}/tool-results",
    response_model=ToolResultsOut,
    responses=problems(
        _TURN,
        SEQUENCES,
        {
            409: ("turn_not_waiting", "tool_result_already_posted"),
            422: (
                "no_tool_results",
                "duplicate_tool_result",
                "unknown_tool_call",
                "message_too_large",
            ),
            503: ("shutting_down",),
        },
        body=True,
    ),
)
async def post_tool_results(
    session_id: SessionId,
    turn_id: TurnId,
    body: Annotated[ToolResultsBody, Body(openapi_examples=examples.TOOL_RESULTS)],
    container: ContainerDep,
    wait: Wait = False,
) -> Response:
    """Results of caller-executed tool calls; the turn resumes once every call has one."""
    turn = await container.turns.post_tool_results(session_id, turn_id, body.results, wait=wait)
    return json_response(tool_results_json(turn))


@router.post(
    "/{turn_id}/cancel",
    response_model=TurnOut,
    responses=problems(_TURN, SEQUENCES, {409: ("turn_not_active",)}),
)
async def cancel_turn(session_id: SessionId, turn_id: TurnId, container: ContainerDep) -> Response:
    """Cancel the running turn; answers once it is terminal (bounded wait)."""
    return json_response(turn_json(await container.turns.cancel(session_id, turn_id)))
