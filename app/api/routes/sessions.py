"""``/v1/sessions``: sessions, their messages and context inspection."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query
from fastapi.responses import Response

from app.api import examples
from app.api.auth import PrincipalDep
from app.api.deps import ContainerDep
from app.api.inputs.appends import AppendInput
from app.api.jsonbody import JsonBodyRoute
from app.api.jsonresponse import json_response
from app.api.render.messages import appended_json, message_page_json
from app.api.render.prepare import inspection_json
from app.api.render.sessions import session_json, session_page_json
from app.api.responses import (
    MODEL,
    PIPELINE,
    SEQUENCES,
    SESSION,
    SESSION_CONFIG,
    SESSION_MODELS,
    TOKENIZER,
    WORKSPACE,
    problems,
)
from app.api.schemas.fields import MAX_EXACT_INT
from app.api.schemas.prepare import EncodeName, PrepareResponse
from app.api.schemas.sessions import (
    AppendResponse,
    MessagePage,
    SessionCreate,
    SessionOut,
    SessionPage,
    SessionPatch,
)
from app.services.cursors import SESSION_CURSOR

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], route_class=JsonBodyRoute)

SessionId = Annotated[str, Path(min_length=1, max_length=200)]


class ContextResponse(PrepareResponse):
    auto_compact_percent: float
    calibration: dict[str, Any] | None = None


@router.post(
    "",
    status_code=201,
    response_model=SessionOut,
    responses=problems(
        SESSION_MODELS,
        WORKSPACE,
        TOKENIZER,
        {
            422: (
                "tool_name_conflict",
                "duplicate_tool_name",
                "unresolvable_schema_ref",
                "empty_system_context_part",
                "system_context_part_too_large",
            )
        },
        body=True,
    ),
)
async def create_session(
    body: Annotated[SessionCreate, Body(openapi_examples=examples.SESSION_CREATE)],
    container: ContainerDep,
    principal: PrincipalDep,
) -> Response:
    """Create a session with its agent definition, model, workspace and sandbox settings."""
    created = await container.sessions.create(body, principal.tenant_id)
    return json_response(session_json(created), status_code=201)


@router.get("", response_model=SessionPage, responses=problems({422: ("invalid_cursor",)}))
async def list_sessions(
    container: ContainerDep,
    principal: PrincipalDep,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[
        str | None,
        # The service's own check answers (``invalid_cursor``); the schema states it.
        Query(
            json_schema_extra={"pattern": SESSION_CURSOR.pattern},
            description="`next_cursor` of the previous page",
        ),
    ] = None,
) -> Response:
    """The calling tenant's sessions, newest first, cursor-paginated."""
    page = await container.sessions.list(principal.tenant_id, limit=limit, cursor=cursor)
    return json_response(session_page_json(page))


@router.get("/{session_id}", response_model=SessionOut, responses=problems(SESSION))
async def get_session(session_id: SessionId, container: ContainerDep) -> Response:
    """Read one session."""
    # A proxied call this process is still recording (its answer, usage) is counted already.
    await container.proxy.settled(session_id)
    return json_response(session_json(await container.sessions.get(session_id)))


@router.patch(
    "/{session_id}",
    response_model=SessionOut,
    responses=problems(
        SESSION,
        SESSION_CONFIG,
        SESSION_MODELS,
        WORKSPACE,
        TOKENIZER,
        {422: ("system_context_part_too_large",)},
        body=True,
    ),
)
async def patch_session(
    session_id: SessionId,
    body: Annotated[SessionPatch, Body(openapi_examples=examples.SESSION_PATCH)],
    container: ContainerDep,
) -> Response:
    """Change title, model, sandbox, disabled skills or workspace inputs."""
    return json_response(session_json(await container.sessions.patch(session_id, body)))


@router.post(
    "/{session_id}/messages",
    status_code=201,
    response_model=AppendResponse,
    responses=problems(
        SESSION,
        SEQUENCES,
        MODEL,
        TOKENIZER,
        {
            409: ("duplicate_tool_call_id", "tool_result_already_posted"),
            422: (
                "message_too_large",
                "unknown_tool_call",
                "duplicate_tool_result",
                "system_message_in_conversation",
                "empty_message",
                "invalid_block",
                "invalid_block_order",
                "invalid_kind",
                "invalid_tool_message",
            ),
        },
        body=True,
    ),
)
async def append_messages(
    session_id: SessionId,
    body: Annotated[AppendInput, Body(openapi_examples=examples.APPEND)],
    container: ContainerDep,
) -> Response:
    """Append messages (all-or-nothing, spec §5 rules) → their ids and sequences."""
    # After a proxied answer this process is still writing (it came first).
    await container.proxy.settled(session_id)
    stored = await container.messages.append(session_id, body.batch)
    return json_response(appended_json(stored), status_code=201)


@router.get("/{session_id}/messages", response_model=MessagePage, responses=problems(SESSION))
async def list_messages(
    session_id: SessionId,
    container: ContainerDep,
    after_sequence: Annotated[int, Query(ge=0, le=MAX_EXACT_INT)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> Response:
    """Raw stored messages in sequence order (never synthetic items)."""
    # A proxied answer this process is still writing is part of the transcript already.
    await container.proxy.settled(session_id)
    page = await container.messages.page(session_id, after_sequence=after_sequence, limit=limit)
    return json_response(message_page_json(page))


@router.get(
    "/{session_id}/context",
    response_model=ContextResponse,
    responses=problems(SESSION, SESSION_CONFIG, MODEL, PIPELINE, {422: ("compaction_error",)}),
)
async def inspect_context(
    session_id: SessionId,
    container: ContainerDep,
    encode: Annotated[EncodeName | None, Query()] = None,
) -> Response:
    """The next request for the active Conversation, read-only (no World State sampling)."""
    with container.observability.prepare("inspection"):
        inspection = await container.inspection.inspection(session_id)
        answer = inspection_json(inspection, encode_as=encode)
    return json_response(answer)
