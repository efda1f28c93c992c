"""``/v1/sessions/{id}``: compaction checkpoints, rewind, replay and transcript (SPEC §7)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from app.api.deps import ContainerDep
from app.api.jsonresponse import json_response
from app.api.problems import PROBLEM_RESPONSES
from app.api.schemas.compactions import (
    CheckpointListOut,
    CheckpointOut,
    CompactBody,
    ReloadOut,
    ReplayOut,
    RewindBody,
    SummaryRequestOut,
    TranscriptOut,
)
from app.api.schemas.prepare import EncodeName
from app.core.chat_rules import MAX_SEQUENCE

router = APIRouter(prefix="/v1/sessions", tags=["compaction"], responses=PROBLEM_RESPONSES)

SessionId = Annotated[str, Path(min_length=1, max_length=200)]
CompactionId = Annotated[str, Path(min_length=1, max_length=200)]


@router.post("/{session_id}/compactions", status_code=201, response_model=CheckpointOut)
async def compact(session_id: SessionId, body: CompactBody, container: ContainerDep) -> Response:
    """Compact now (manual): with the session's summary model, or install your own `summary`."""
    checkpoint = await container.compactor.compact(
        session_id,
        summary=body.summary,
        model=body.model,
        expected_through_message_sequence=body.expected_through_message_sequence,
        through_message_sequence=body.through_message_sequence,
    )
    return json_response(checkpoint, status_code=201)


@router.get("/{session_id}/compactions/request", response_model=SummaryRequestOut)
async def summary_request(
    session_id: SessionId,
    container: ContainerDep,
    encode: Annotated[EncodeName | None, Query()] = None,
) -> Response:
    """The exact summary request your own model should answer (remembered as the session's last
    served request; the conversation is not changed)."""
    return json_response(await container.compactor.summary_request(session_id, encode_as=encode))


@router.get("/{session_id}/compactions", response_model=CheckpointListOut)
async def list_compactions(
    session_id: SessionId,
    container: ContainerDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    before_sequence: Annotated[
        int | None,
        Query(ge=1, le=MAX_SEQUENCE, description="`next_before_sequence` of the previous page"),
    ] = None,
) -> Response:
    """Checkpoints, newest first."""
    return json_response(
        await container.compactor.list(session_id, limit=limit, before_sequence=before_sequence)
    )


@router.get("/{session_id}/compactions/{compaction_id}", response_model=CheckpointOut)
async def get_compaction(
    session_id: SessionId, compaction_id: CompactionId, container: ContainerDep
) -> Response:
    """One checkpoint: summary, reminder, boundaries, token figures, timings, attempts."""
    return json_response(await container.compactor.get(session_id, compaction_id))


@router.post("/{session_id}/rewind", status_code=201, response_model=CheckpointOut)
async def rewind(session_id: SessionId, body: RewindBody, container: ContainerDep) -> Response:
    """Reinstall an earlier checkpoint as a new `rewind` checkpoint (nothing is deleted)."""
    checkpoint = await container.compactor.rewind(session_id, body.compaction_id)
    return json_response(checkpoint, status_code=201)


@router.get("/{session_id}/replay", response_model=ReplayOut)
async def replay(
    session_id: SessionId,
    container: ContainerDep,
    selector: Annotated[
        str,
        Query(
            max_length=300,
            description="`latest` | `compaction:{id}` | `through_message:{n}`",
        ),
    ] = "latest",
) -> Response:
    """Rebuild a projection read-only: the latest, a checkpoint's, or as of a message."""
    return json_response(await container.compactor.replay(session_id, selector))


@router.get("/{session_id}/transcript", response_model=TranscriptOut)
async def transcript(
    session_id: SessionId,
    container: ContainerDep,
    compaction_id: Annotated[str | None, Query(max_length=200)] = None,
    # Only the upper bound here: the transcript query refuses a negative value with its own code.
    after_sequence: Annotated[
        int, Query(le=MAX_SEQUENCE, description="Messages after this sequence (≥ 0).")
    ] = 0,
    limit: Annotated[int, Query(description="Messages per page, 1 to 50.")] = 20,
) -> Response:
    """Raw messages a checkpoint covers, paginated (never synthetic items)."""
    return json_response(
        await container.compactor.transcript(
            session_id, compaction_id=compaction_id, after_sequence=after_sequence, limit=limit
        )
    )


@router.post("/{session_id}/reload", response_model=ReloadOut)
async def reload_session(session_id: SessionId, container: ContainerDep) -> Response:
    """Rebuild the session from the database and clear `reload_required`."""
    return json_response(await container.compactor.rebuild(session_id))
