"""``POST /v1/sessions/{id}/agent-messages``: queue a message from a sub-agent or service."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path
from fastapi.responses import Response

from app.api import examples
from app.api.deps import ContainerDep
from app.api.jsonresponse import json_response
from app.api.render.turns import queued_message_json
from app.api.responses import MODEL, SEQUENCES, SESSION, TOKENIZER, problems
from app.api.schemas.turns import AgentMessageBody, AgentMessageOut

router = APIRouter(prefix="/v1/sessions", tags=["turns"])

SessionId = Annotated[str, Path(min_length=1, max_length=200)]


@router.post(
    "/{session_id}/agent-messages",
    status_code=202,
    response_model=AgentMessageOut,
    responses=problems(
        SESSION, SEQUENCES, MODEL, TOKENIZER, {422: ("agent_message_too_large",)}, body=True
    ),
)
async def deliver_agent_message(
    session_id: SessionId,
    body: Annotated[AgentMessageBody, Body(openapi_examples=examples.AGENT_MESSAGE)],
    container: ContainerDep,
) -> Response:
    """Queue an agent message; it never starts a turn and is read before the next model call."""
    queued = await container.agent_messages.deliver(session_id, body)
    return json_response(queued_message_json(queued), status_code=202)
