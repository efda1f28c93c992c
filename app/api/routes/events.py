"""``GET /v1/sessions/{id}/events``: live updates as Server-Sent Events."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Header, Path, Query
from fastapi.responses import StreamingResponse

from app.api.deps import ContainerDep
from app.api.responses import SESSION, problems
from app.api.schemas.fields import MAX_EXACT_INT, decimal_at_most
from app.core.chat_rules import MAX_SEQUENCE
from app.core.errors import InvalidInput

# An update sequence: digits, at most 2⁶³−1 (checked before the stream starts: past it, the
# first read would fail after the 200), or nothing.
LAST_EVENT_ID_PATTERN = f"^(?:{decimal_at_most(MAX_SEQUENCE)})?$"
_LAST_EVENT_ID = re.compile(LAST_EVENT_ID_PATTERN)


def _after(last_event_id: str, after: int | None) -> int:
    if not last_event_id:
        return after or 0
    if _LAST_EVENT_ID.fullmatch(last_event_id) is None:
        raise InvalidInput(
            "invalid_last_event_id",
            f"Last-Event-ID {last_event_id[:40]!r} is not an update sequence (digits, at most "
            f"{MAX_SEQUENCE}); send the id: of the last event received",
        )
    return int(last_event_id)


router = APIRouter(prefix="/v1/sessions", tags=["turns"])

SessionId = Annotated[str, Path(min_length=1, max_length=200)]


@router.get(
    "/{session_id}/events",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "SSE stream"},
        **problems(SESSION, {422: ("invalid_last_event_id",)}),
    },
)
async def stream_events(
    session_id: SessionId,
    container: ContainerDep,
    last_event_id: Annotated[
        str,
        Header(
            alias="Last-Event-ID",
            json_schema_extra={"pattern": LAST_EVENT_ID_PATTERN},
            description="The `id:` of the last event received (an update sequence); empty is "
            "the same as absent.",
        ),
    ] = "",
    after: Annotated[
        int | None, Query(ge=0, le=MAX_EXACT_INT, description="Replay updates after this id")
    ] = None,
) -> StreamingResponse:
    """Server-Sent Events: every update after Last-Event-ID (or ?after=), then live ones."""
    stream = await container.turns.events(session_id, _after(last_event_id, after))
    return StreamingResponse(
        stream,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
