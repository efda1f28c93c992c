"""``/v1/sessions/{id}``: compaction checkpoints, rewind, replay and transcript (spec §7)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Path, Query
from fastapi.responses import Response

from app.api import examples
from app.api.deps import ContainerDep
from app.api.jsonresponse import json_response
from app.api.render.compactions import (
    checkpoint_json,
    checkpoint_page_json,
    reload_json,
    replay_json,
    summary_request_json,
    transcript_json,
)
from app.api.responses import (
    COMPACTION,
    MODEL,
    PIPELINE,
    SEQUENCES,
    SESSION,
    SESSION_CONFIG,
    problems,
)
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
from app.api.schemas.fields import MAX_EXACT_INT, decimal_at_most
from app.api.schemas.prepare import EncodeName
from app.api.schemas.shapes import NOT_BLANK, NOT_BLANK_CHAR
from app.core.chat_rules import MAX_SEQUENCE
from app.core.compaction.transcript import DEFAULT_TRANSCRIPT_LIMIT, MAX_TRANSCRIPT_LIMIT

router = APIRouter(prefix="/v1/sessions", tags=["compaction"])

# ``core.compaction.replay.parse_replay_selector``'s grammar: a compaction id without
# surrounding whitespace, a sequence of digits at most 2⁶³−1.
SELECTOR_PATTERN = (
    f"^(?:latest|compaction:{NOT_BLANK_CHAR}(?:[^\\u0000]*{NOT_BLANK_CHAR})?"
    f"|through_message:{decimal_at_most(MAX_SEQUENCE)})$"
)

SessionId = Annotated[str, Path(min_length=1, max_length=200)]
CompactionId = Annotated[str, Path(min_length=1, max_length=200)]


@router.post(
    "/{session_id}/compactions",
    status_code=201,
    response_model=CheckpointOut,
    responses=problems(
        SESSION,
        SESSION_CONFIG,
        SEQUENCES,
        MODEL,
        PIPELINE,
        COMPACTION,
        {
            409: ("conversation_changed", "summary_coverage_unknown", "compaction_not_smaller"),
            422: (
                "invalid_summary",
                "coverage_mismatch",
                "coverage_out_of_range",
                "summary_drops_user_facts",
            ),
        },
        body=True,
    ),
)
async def compact(
    session_id: SessionId,
    body: Annotated[CompactBody, Body(openapi_examples=examples.COMPACT)],
    container: ContainerDep,
) -> Response:
    """Compact now (manual): with the session's summary model, or install your own `summary`."""
    checkpoint = await container.compactor.compact(
        session_id,
        summary=body.summary,
        model=body.model,
        expected_through_message_sequence=body.expected_through_message_sequence,
        through_message_sequence=body.through_message_sequence,
        accept_dropped_user_facts=body.accept_dropped_user_facts,
        allow_larger=body.allow_larger,
    )
    return json_response(checkpoint_json(checkpoint), status_code=201)


@router.get(
    "/{session_id}/compactions/request",
    response_model=SummaryRequestOut,
    responses=problems(
        SESSION,
        SESSION_CONFIG,
        MODEL,
        PIPELINE,
        {
            409: ("reload_required", "missing_last_user", "empty_conversation"),
            413: ("summary_input_overflow",),
            422: ("compaction_error",),
        },
    ),
)
async def summary_request(
    session_id: SessionId,
    container: ContainerDep,
    encode: Annotated[EncodeName | None, Query()] = None,
) -> Response:
    """The exact summary request your own model should answer (remembered as the session's last
    served request; the conversation is not changed)."""
    request = await container.compactor.summary_request(session_id)
    return json_response(summary_request_json(request, encode_as=encode))


@router.get(
    "/{session_id}/compactions", response_model=CheckpointListOut, responses=problems(SESSION)
)
async def list_compactions(
    session_id: SessionId,
    container: ContainerDep,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    before_sequence: Annotated[
        int | None,
        Query(ge=1, le=MAX_EXACT_INT, description="`next_before_sequence` of the previous page"),
    ] = None,
) -> Response:
    """Checkpoints, newest first."""
    page = await container.compactor.list(session_id, limit=limit, before_sequence=before_sequence)
    return json_response(checkpoint_page_json(page))


@router.get(
    "/{session_id}/compactions/{compaction_id}",
    response_model=CheckpointOut,
    responses=problems({404: ("session_not_found", "compaction_not_found")}),
)
async def get_compaction(
    session_id: SessionId, compaction_id: CompactionId, container: ContainerDep
) -> Response:
    """One checkpoint: summary, reminder, boundaries, token figures, timings, attempts."""
    return json_response(checkpoint_json(await container.compactor.get(session_id, compaction_id)))


@router.post(
    "/{session_id}/rewind",
    status_code=201,
    response_model=CheckpointOut,
    responses=problems(
        SEQUENCES,
        {
            404: ("session_not_found",),
            409: ("session_active", "reload_required", "compaction_conflict"),
            422: ("unknown_compaction_id", "invalid_rewind", "compaction_error"),
            503: ("persistence_error",),
        },
        body=True,
    ),
)
async def rewind(
    session_id: SessionId,
    body: Annotated[RewindBody, Body(openapi_examples=examples.REWIND)],
    container: ContainerDep,
) -> Response:
    """Reinstall an earlier checkpoint as a new `rewind` checkpoint (nothing is deleted)."""
    checkpoint = await container.compactor.rewind(session_id, body.compaction_id)
    return json_response(checkpoint_json(checkpoint), status_code=201)


@router.get(
    "/{session_id}/replay",
    response_model=ReplayOut,
    responses=problems(
        {
            404: ("session_not_found",),
            422: ("invalid_selector", "unknown_compaction_id"),
        }
    ),
)
async def replay(
    session_id: SessionId,
    container: ContainerDep,
    selector: Annotated[
        str,
        Query(
            max_length=300,
            json_schema_extra={"pattern": SELECTOR_PATTERN},
            description="`latest` | `compaction:{id}` | `through_message:{n}` (n from 0 to 2⁶³−1)",
        ),
    ] = "latest",
) -> Response:
    """Rebuild a projection read-only: the latest, a checkpoint's, or as of a message."""
    return json_response(replay_json(await container.compactor.replay(session_id, selector)))


@router.get(
    "/{session_id}/transcript",
    response_model=TranscriptOut,
    responses=problems(
        {
            # 404 compaction_not_found: without compaction_id, the session has no checkpoint.
            404: ("session_not_found", "compaction_not_found"),
            422: (
                "invalid_after_sequence",
                "invalid_limit",
                "invalid_compaction_id",
                "unknown_compaction_id",
            ),
        }
    ),
)
async def transcript(
    session_id: SessionId,
    container: ContainerDep,
    compaction_id: Annotated[
        str | None, Query(max_length=200, json_schema_extra={"pattern": NOT_BLANK})
    ] = None,
    # The transcript query's own rules answer (``invalid_after_sequence``, ``invalid_limit``, as
    # for the ``conversation_history`` tool); the schema states them.
    after_sequence: Annotated[
        int,
        Query(
            le=MAX_EXACT_INT,
            json_schema_extra={"minimum": 0},
            description="Messages after this sequence.",
        ),
    ] = 0,
    limit: Annotated[
        int,
        Query(
            json_schema_extra={"minimum": 1, "maximum": MAX_TRANSCRIPT_LIMIT},
            description="Messages per page.",
        ),
    ] = DEFAULT_TRANSCRIPT_LIMIT,
) -> Response:
    """Raw messages a checkpoint covers, paginated (never synthetic items)."""
    page = await container.compactor.transcript(
        session_id, compaction_id=compaction_id, after_sequence=after_sequence, limit=limit
    )
    return json_response(transcript_json(page))


@router.post(
    "/{session_id}/reload",
    response_model=ReloadOut,
    responses=problems(SESSION, {409: ("session_active",), 503: ("reload_failed",)}),
)
async def reload_session(session_id: SessionId, container: ContainerDep) -> Response:
    """Rebuild the session from the database and clear `reload_required`."""
    return json_response(reload_json(await container.compactor.rebuild(session_id)))
