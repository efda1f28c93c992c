"""``POST /v1/tokens/count``: what a text, a content array or a whole request costs."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body
from fastapi.responses import Response

from app.api import examples
from app.api.auth import PrincipalDep
from app.api.deps import ContainerDep
from app.api.inputs.tokens import TokenCountInput
from app.api.jsonbody import JsonBodyRoute
from app.api.jsonresponse import json_response
from app.api.responses import NAMED_MODEL, PIPELINE, problems
from app.api.schemas.tokens import TokenCountOut
from app.core.pipeline.item_caps import content_tokens
from app.services.tokens import count_prepare, count_text

router = APIRouter(prefix="/v1/tokens", tags=["tokens"], route_class=JsonBodyRoute)


@router.post(
    "/count",
    response_model=TokenCountOut,
    responses=problems(
        NAMED_MODEL,
        PIPELINE,
        {422: ("unknown_token_counter", "invalid_block", "invalid_tool_message")},
        body=True,
    ),
)
async def count_tokens(
    body: Annotated[TokenCountInput, Body(openapi_examples=examples.TOKEN_COUNT)],
    container: ContainerDep,
    principal: PrincipalDep,
) -> Response:
    """Count tokens with a named counter; give exactly one of `text`, `content` or `prepare`.

    - `text`: raw text without any message framing (`estimate`: ceil(UTF-8 bytes / 4)).
    - `content`: a content array as sent: artifacts never count; `estimate` measures its compact
      JSON, a tiktoken counter its texts, tool calls and results (no message framing).
    - `prepare`: a `POST /v1/prepare` body; `tokens` is the `estimated_input_tokens` of the
      request it builds (framing and reply priming included) and `regions` splits it by region.
      Without `counter` the model's own counter is used; calibration is never applied here.

    An unknown counter is a 422 `unknown_token_counter`. Nothing is stored.
    """
    prepare = body.prepare
    if prepare is not None:
        if prepare.model is not None:
            capabilities = prepare.model.to_core()
        else:
            assert prepare.model_id is not None  # the schema guarantees exactly one
            capabilities = (
                await container.models.named(
                    principal.tenant_id, prepare.model_id, "prepare.model_id"
                )
            ).capabilities
        counter = container.counter(body.counter or capabilities.token_counter)
        with container.observability.prepare("tokens"):
            counted = count_prepare(
                prepare.system_context,
                prepare.conversation,
                prepare.tools,
                capabilities,
                prepare.pruning,
                counter,
            )
        return json_response(counted)
    counter = container.counter(body.counter or "estimate")
    if body.text is not None:
        tokens = count_text(counter, body.text)
    else:
        assert body.content is not None  # the schema guarantees exactly one
        tokens = content_tokens(body.content, counter)
    return json_response({"counter": counter.name, "tokens": tokens})
