"""``PrepareResponse``, ``ContextResponse`` and ``SessionPrepareResponse`` from the prepare
services' results: the shape every answer with a prepared request shares (spec §16)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from app.core.caching.breakpoints import plan_for
from app.core.capabilities import PromptCaching
from app.core.pipeline.prepared_call import PreparedModelCall, ProjectionReport
from app.providers.encoding import encode
from app.services.budget import auto_compact_percent, budget_to_json
from app.services.inspection import Inspection
from app.services.prepare import StatelessPrepared
from app.services.request_prefix import prefixed, request_digest
from app.services.session_prepare import PreparedSessionCall

__all__ = ["inspection_json", "prepared_json", "session_prepared_json", "stateless_json"]


def prepared_json(
    prepared: PreparedModelCall,
    *,
    encode_as: str | None,
    model_name: str | None = None,
    prompt_caching: PromptCaching = "off",
    cache_seed: str | None = None,
    reasoning: bool = False,
) -> dict[str, Any]:
    """The response shape shared by ``/v1/prepare``, session prepare, context inspection and
    the summary request.

    An encoded ``provider_payload`` carries the cache breakpoints a model call would send
    (``app.core.caching.breakpoints``: ``prompt_caching`` of the model, ``cache_seed`` the session
    id or ``None`` for the stateless prepare; the previous call's breakpoint from the prefix
    record's ``stable_messages``). A request no service compared (the summary model's) gets the
    record of its own content. ``reasoning`` is the model's capability, which its client encodes
    with (the same bytes).
    """
    if prepared.prefix_record is None:
        prepared = prefixed(prepared, prepared.items, None, identify_stored=False)
    assert prepared.prefix_record is not None
    payload = None
    if encode_as is not None:
        caching = plan_for(
            prepared,
            prompt_caching=prompt_caching,
            seed=cache_seed,
            stable_messages=prepared.stable_messages,
        )
        payload = encode(
            prepared.request,
            encode_as,  # type: ignore[arg-type]
            model=model_name,
            caching=caching,
            reasoning=reasoning,
        )
    projection = prepared.projection  # ``asdict``'s dict: integers only, nothing to copy
    return {
        "request": prepared.request,
        "budget": budget_to_json(prepared.budget),
        "projection": {name: getattr(projection, name) for name in _PROJECTION_FIELDS},
        "provenance": prepared.provenance,
        "provider_payload": payload,
        "request_digest": request_digest(prepared.prefix_record),
    }


_PROJECTION_FIELDS = tuple(field.name for field in fields(ProjectionReport))


def stateless_json(result: StatelessPrepared, *, encode_as: str | None) -> dict[str, Any]:
    """``POST /v1/prepare``: the shared shape plus the spilled texts for the caller to write."""
    body = prepared_json(
        result.prepared,
        encode_as=encode_as,
        model_name=result.model_name,
        prompt_caching=result.capabilities.prompt_caching,
        cache_seed=None,  # no session: the key follows the tools and the system
        reasoning=result.capabilities.reasoning,
    )
    body["spills"] = [
        {"tool_call_id": s.tool_call_id, "path": s.path, "text": s.text} for s in result.spills
    ]
    return body


def inspection_json(inspection: Inspection, *, encode_as: str | None) -> dict[str, Any]:
    """The ``GET .../context`` answer."""
    model = inspection.model
    body = prepared_json(
        inspection.prepared,
        encode_as=encode_as,
        model_name=model.provider.model_name,
        prompt_caching=model.capabilities.prompt_caching,
        cache_seed=inspection.session_id,
        reasoning=model.capabilities.reasoning,
    )
    body["auto_compact_percent"] = auto_compact_percent(inspection.prepared.budget)
    calibration = inspection.calibration
    body["calibration"] = None if calibration is None else calibration.to_json()
    return body


def session_prepared_json(
    session_id: str, call: PreparedSessionCall, *, encode_as: str | None
) -> dict[str, Any]:
    """The ``POST .../prepare`` answer of a session."""
    body = prepared_json(
        call.prepared,
        encode_as=encode_as,
        model_name=call.model.provider.model_name,
        prompt_caching=call.model.capabilities.prompt_caching,
        cache_seed=session_id,
        reasoning=call.model.capabilities.reasoning,
    )
    body["auto_compact_percent"] = auto_compact_percent(call.prepared.budget)
    body["world_state_message_ids"] = call.world_state_message_ids
    return body
