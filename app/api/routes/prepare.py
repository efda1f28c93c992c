"""``POST /v1/prepare``: the stateless pipeline on what the body carries; stores nothing."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import Response

from app.api import examples
from app.api.inputs.prepare import PrepareInput
from app.api.jsonbody import JsonBodyRoute
from app.api.jsonresponse import json_response
from app.api.render.prepare import stateless_json
from app.api.responses import NAMED_MODEL, PIPELINE, problems
from app.api.schemas.prepare import EncodeName, StatelessPrepareResponse
from app.container import Container
from app.core.tenancy import Principal
from app.services.prepare import run_prepare

router = APIRouter(prefix="/v1", tags=["stateless"], route_class=JsonBodyRoute)


@router.post(
    "/prepare",
    response_model=StatelessPrepareResponse,
    responses=problems(
        NAMED_MODEL,
        PIPELINE,
        {422: ("invalid_block", "invalid_tool_message", "invalid_request_digest")},
        body=True,
    ),
)
async def prepare_stateless(
    body: Annotated[PrepareInput, Body(openapi_examples=examples.PREPARE)],
    request: Request,
    encode: Annotated[
        EncodeName | None, Query(description="Overrides the body's `encode`.")
    ] = None,
) -> Response:
    """Build the model request, budget and projection report for the given regions."""
    # The router's ``require_api_key`` (every /v1 route) authenticated the caller and left its
    # principal on the request; the container is the app's. Read here rather than declared
    # again as ``PrincipalDep`` and ``ContainerDep``: FastAPI solves each declared dependency on
    # every request, a tenth of a small prepare's CPU (``docs/decisions.md``).
    container: Container = request.app.state.container
    principal: Principal = request.state.principal
    if body.model is not None:
        capabilities, model_name = body.model.to_core(), body.model.model_name
    else:
        assert body.model_id is not None  # the schema guarantees exactly one
        entry = await container.models.named(principal.tenant_id, body.model_id, "model_id")
        capabilities, model_name = entry.capabilities, entry.provider.model_name
    with container.observability.prepare("stateless"):
        result = run_prepare(
            body.system_context,
            body.conversation,
            body.tools,
            capabilities,
            body.pruning,
            container.counter(capabilities.token_counter),
            model_name=model_name,
            previous_request_digest=body.previous_request_digest,
        )
        answer = stateless_json(result, encode_as=encode or body.encode)
    return json_response(answer)
