"""Compatible endpoints (spec §21): the official SDKs' own requests, continuing managed sessions.

``base_url=http://HOST/v1/compat/openai`` for the OpenAI SDK (Chat Completions, Responses) and
``http://HOST/v1/compat/anthropic`` for the Anthropic SDK (Messages). Every answer, errors
included, is in the protocol's own shape, so the SDK raises its own exception types; what the
service did is told in ``X-Ctxsvc-*`` response headers.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from app.api.auth import compat_key_declared, compat_principal
from app.api.compat.anthropic_messages import CODEC as ANTHROPIC_MESSAGES
from app.api.compat.openai_chat import CODEC as OPENAI_CHAT
from app.api.compat.openai_chat import OpenAIChatCodec
from app.api.compat.openai_responses import CODEC as OPENAI_RESPONSES
from app.api.problems import status_of
from app.core.errors import InvalidInput, ServiceError
from app.fastjson import loads
from app.observability.context import note_problem
from app.providers.base import ProviderError
from app.services.proxy.contract import Codec, ProxyOutcome

__all__ = ["refusal_response", "router"]

# ``compat_key_declared``: the key is checked before the body is read (``app.api.key_first``).
router = APIRouter(
    prefix="/v1/compat",
    tags=["compatible endpoints"],
    dependencies=[Depends(compat_key_declared)],
)

# A provider failure's code → the status the protocol's SDK reads (its exception type).
_PROVIDER_STATUS = {
    "context_overflow": 400,
    "bad_request": 400,
    "auth": 401,
    "rate_limited": 429,
    "timeout": 504,
    "server_error": 502,
    "protocol": 502,
}
SESSION_HEADER = "x-ctxsvc-session-id"
KEY_HEADER = "x-ctxsvc-provider-key"


def _status(exc: ServiceError) -> int:
    if isinstance(exc, ProviderError):
        return _PROVIDER_STATUS.get(exc.code, 502)
    if exc.kind in ("too_large", "unprocessable", "invalid"):
        # What the providers answer for a request they refuse, an over-long one included:
        # 400, the SDK's BadRequestError (the stable ``code`` says which refusal it is).
        return 400
    return status_of(exc)


def _error(codec: Codec, exc: ServiceError) -> JSONResponse:
    status = _status(exc)
    # The access line names the stable code, as it does for a problem+json answer.
    note_problem(exc.code)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(codec.render_error(status, exc.code, exc.detail), status, headers)


def refusal_response(path: str, exc: ServiceError) -> JSONResponse:
    """A refusal before any route ran (the key before the body), in the shape of the protocol
    ``path`` names."""
    codec: Codec = ANTHROPIC_MESSAGES if path.startswith("/v1/compat/anthropic") else OPENAI_CHAT
    return _error(codec, exc)


def _headers(outcome: ProxyOutcome) -> dict[str, str]:
    budget = outcome.budget
    headers = {
        "X-Ctxsvc-Session-Id": outcome.session_id,
        "X-Ctxsvc-Input-Tokens": str(budget.estimated_input_tokens),
        "X-Ctxsvc-Effective-Input-Tokens": str(budget.effective_input_tokens),
        "X-Ctxsvc-Context-Window-Tokens": str(budget.context_window_tokens),
        "X-Ctxsvc-Compacted": "true" if outcome.compacted else "false",
    }
    if outcome.forked_from is not None:
        headers["X-Ctxsvc-Forked-From"] = outcome.forked_from
    return headers


async def _serve(request: Request, codec: Codec) -> Response:
    container = request.app.state.container
    try:
        principal = await compat_principal(request)
        try:
            body = loads(await request.body())
        except ValueError as bad:
            raise InvalidInput("malformed_json", f"the body is not JSON: {bad}") from None
        if not isinstance(body, dict):
            raise InvalidInput("malformed_json", "the body must be a JSON object")
        proxied = codec.decode(body)
        call = await container.proxy.begin(
            proxied,
            tenant_id=principal.tenant_id,
            session_id=request.headers.get(SESSION_HEADER) or None,
            caller_key=request.headers.get(KEY_HEADER) or None,
        )
        response_id = f"ctx-{uuid.uuid4().hex}"
        headers = _headers(call.outcome)
        if proxied.stream:
            stream: AsyncIterator[bytes]
            if isinstance(codec, OpenAIChatCodec):
                stream = codec.render_stream_with(
                    call.events(),
                    model=proxied.model,
                    response_id=response_id,
                    include_usage=codec.includes_usage(proxied),
                )
            else:
                stream = codec.render_stream(
                    call.events(), model=proxied.model, response_id=response_id
                )
            return StreamingResponse(stream, media_type="text/event-stream", headers=headers)
        answer = await call.complete()
    except ServiceError as exc:
        return _error(codec, exc)
    rendered: dict[str, Any] = codec.render(answer, model=proxied.model, response_id=response_id)
    return JSONResponse(rendered, headers=headers)


@router.post("/openai/chat/completions", include_in_schema=False)
async def openai_chat_completions(request: Request) -> Response:
    """OpenAI Chat Completions, continuing a managed session."""
    return await _serve(request, OPENAI_CHAT)


@router.post("/openai/responses", include_in_schema=False)
async def openai_responses(request: Request) -> Response:
    """OpenAI Responses, continuing a managed session."""
    return await _serve(request, OPENAI_RESPONSES)


@router.post("/anthropic/v1/messages", include_in_schema=False)
async def anthropic_messages(request: Request) -> Response:
    """Anthropic Messages, continuing a managed session."""
    return await _serve(request, ANTHROPIC_MESSAGES)
