"""``GET /v1/sessions/{id}/events``: live updates as Server-Sent Events."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Path, Query
from fastapi.responses import StreamingResponse

from app.api.deps import ContainerDep
from app.api.problems import PROBLEM_RESPONSES
from app.core.chat_rules import MAX_SEQUENCE
from app.core.errors import InvalidInput

router = APIRouter(prefix="/v1/sessions", tags=["turns"], responses=PROBLEM_RESPONSES)

SessionId = Annotated[str, Path(min_length=1, max_length=200)]


def _after(last_event_id: str | None, after: int | None) -> int:
    if last_event_id is None or not last_event_id.strip():
        return after or 0
    try:
        value = int(last_event_id)
    except ValueError:
        raise InvalidInput(
            "invalid_last_event_id",
            f"Last-Event-ID {last_event_id!r} is not an update sequence; send the id: of the "
            "last event received",
        ) from None
    if not 0 <= value <= MAX_SEQUENCE:
        # Checked before the stream starts: past this, the first read fails after the 200.
        raise InvalidInput(
            "invalid_last_event_id",
            f"Last-Event-ID must be an update sequence between 0 and {MAX_SEQUENCE}",
        )
    return value


@router.get(
    "/{session_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "SSE stream"}},
)
async def stream_events(
    session_id: SessionId,
    container: ContainerDep,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
    after: Annotated[
        int | None, Query(ge=0, le=MAX_SEQUENCE, description="Replay updates after this id")
    ] = None,
) -> StreamingResponse:
    """Server-Sent Events: every update after Last-Event-ID (or ?after=), then live ones."""
    stream = await container.turns.events(session_id, _after(last_event_id, after))
    return StreamingResponse(
        stream,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
