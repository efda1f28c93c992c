"""``POST /v1/sessions/{session_id}/prepare``: the next request for a caller's own model."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path, Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from app.api import examples
from app.api.deps import ContainerDep
from app.api.jsonresponse import json_response
from app.api.render.prepare import session_prepared_json
from app.api.responses import (
    COMPACTION,
    MODEL,
    PIPELINE,
    SEQUENCES,
    SESSION,
    SESSION_CONFIG,
    WORLD_STATE,
    problems,
)
from app.api.schemas.prepare import EncodeName, PrepareResponse

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])


class SessionPrepareBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    encode: EncodeName | None = None


class SessionPrepareResponse(PrepareResponse):
    auto_compact_percent: float = Field(
        description="Estimated input + reserved output as % of the trigger line (100 = compacts)."
    )
    world_state_message_ids: list[str] = Field(
        description="Ids of the World State messages this request stored (in the conversation)."
    )


@router.post(
    "/{session_id}/prepare",
    response_model=SessionPrepareResponse,
    responses=problems(
        SESSION,
        SESSION_CONFIG,
        SEQUENCES,
        MODEL,
        PIPELINE,
        WORLD_STATE,
        COMPACTION,
        # The compaction would not shrink the conversation and the request does not fit.
        {413: ("compaction_error",)},
        body=True,
    ),
)
async def prepare_session(
    session_id: Annotated[str, Path(min_length=1, max_length=200)],
    container: ContainerDep,
    body: Annotated[
        SessionPrepareBody | None, Body(openapi_examples=examples.SESSION_PREPARE)
    ] = None,
    encode: Annotated[
        EncodeName | None, Query(description="Overrides the body's `encode`.")
    ] = None,
) -> Response:
    """Sample World State into the session, then prepare the next request of its Conversation."""
    encode_as = encode or (body.encode if body is not None else None)
    with container.observability.prepare("session"):
        call = await container.session_prepare.prepare_call(session_id)
        answer = session_prepared_json(session_id, call, encode_as=encode_as)
    return json_response(answer)
