"""``/v1/sessions/{session_id}/items`` and ``/epochs``: a session kept as OpenAI Responses items.

What the OpenAI Agents SDK's ``Session`` does with its memory (``ctxsvc_client.agents``): add
items, take back the last one, clear; the prepared items themselves come from the session
prepare with ``encode: "openai_responses"``. Nothing stored is deleted
(``app.services.session_items``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Body, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from app.api import examples
from app.api.deps import ContainerDep
from app.api.jsonresponse import json_response
from app.api.render.messages import appended_json, message_ref_json
from app.api.responses import (
    MODEL,
    SEQUENCES,
    SESSION,
    SESSION_CONFIG,
    TOKENIZER,
    Codes,
    problems,
)
from app.api.routes.sessions import SessionId
from app.api.schemas.fields import JsonObject, RequestModel
from app.api.schemas.items import ResponsesItem
from app.api.schemas.sessions import AppendedMessage, AppendResponse

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])

ItemFormat = Literal["openai_responses"]
_IDLE: Codes = {409: ("session_active",)}


class ItemsBody(RequestModel):
    format: ItemFormat = Field(description="The protocol the items are written in.")
    items: list[ResponsesItem] = Field(
        min_length=1,
        max_length=1000,
        description="Responses input items: user and assistant messages, reasoning, "
        "function_call and function_call_output.",
    )


class PopBody(RequestModel):
    format: ItemFormat = "openai_responses"


class PopResponse(BaseModel):
    item: JsonObject | None = Field(
        description="The item taken back, as the session prepare encoded it; null: nothing to "
        "take back (an empty Conversation, or only a compaction's items)."
    )
    hidden: AppendedMessage | None = Field(
        description="The stored message now hidden from the Conversation (never deleted)."
    )
    kept: AppendedMessage | None = Field(
        description="A copy of that message without the item taken back, appended when it "
        "stood for several items (an answer with reasoning, text and calls)."
    )


class EpochResponse(BaseModel):
    epoch_after_sequence: int = Field(
        description="Every message up to this sequence (and every checkpoint so far) is hidden "
        "from the Conversation; none is deleted."
    )


@router.post(
    "/{session_id}/items",
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
                "unsupported_item",
                "empty_message",
                "invalid_block",
                "invalid_block_order",
                "invalid_tool_message",
            ),
        },
        body=True,
    ),
)
async def add_items(
    session_id: SessionId,
    body: Annotated[ItemsBody, Body(openapi_examples=examples.ITEMS)],
    request: Request,
    container: ContainerDep,
) -> Response:
    """Append Responses items as messages (all-or-nothing, spec §5 rules)."""
    # Validated by ``body``; stored from the JSON as sent, so a reasoning item is echoed back
    # with its fields in the order the provider wrote them.
    items = (await request.json())["items"]
    stored = await container.session_items.add(session_id, items)
    return json_response(appended_json(stored), status_code=201)


@router.post(
    "/{session_id}/items/pop",
    response_model=PopResponse,
    responses=problems(
        SESSION,
        SESSION_CONFIG,
        SEQUENCES,
        MODEL,
        TOKENIZER,
        _IDLE,
        {422: ("message_too_large",)},  # the copy it keeps, for a model changed since
        body=True,
    ),
)
async def pop_item(
    session_id: SessionId,
    container: ContainerDep,
    body: Annotated[PopBody | None, Body(openapi_examples=examples.POP)] = None,
) -> Response:
    """Take back the last item of the Conversation: hidden, never deleted."""
    popped = await container.session_items.pop(session_id)
    return json_response(
        {
            "item": popped.item,
            "hidden": None if popped.hidden is None else message_ref_json(popped.hidden),
            "kept": None if popped.kept is None else message_ref_json(popped.kept),
        }
    )


@router.post(
    "/{session_id}/epochs",
    status_code=201,
    response_model=EpochResponse,
    responses=problems(SESSION, SESSION_CONFIG, _IDLE),
)
async def new_epoch(session_id: SessionId, container: ContainerDep) -> Response:
    """Start a new epoch: the Conversation starts empty; nothing is deleted."""
    last = await container.session_items.new_epoch(session_id)
    return json_response({"epoch_after_sequence": last}, status_code=201)
