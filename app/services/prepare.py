"""The stateless prepare use case (``POST /v1/prepare``) and the JSON shape of a prepared call."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from app.core.caching.breakpoints import plan_for
from app.core.capabilities import ModelCapabilities, PromptCaching
from app.core.content import Item
from app.core.counting import TokenCounter
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import (
    PreparedModelCall,
    PruningWatermark,
    SystemPart,
    ToolDefinition,
)
from app.core.pipeline.prune import spills
from app.fastjson import ESTIMATE
from app.providers.encoding import encode
from app.services.budget import budget_to_json
from app.services.request_prefix import (
    DigestingEstimate,
    decode_digest,
    prefixed,
    request_digest,
)
from app.services.salient_memo import SALIENT_LINES

__all__ = ["prepared_to_json", "run_prepare"]


def prepared_to_json(
    prepared: PreparedModelCall,
    *,
    encode_as: str | None,
    model_name: str | None = None,
    prompt_caching: PromptCaching = "off",
    cache_seed: str | None = None,
    reasoning: bool = False,
) -> dict[str, Any]:
    """The response shape shared by ``/v1/prepare``, session prepare and context inspection.

    An encoded ``provider_payload`` carries the cache breakpoints a model call would send
    (``app.core.caching.breakpoints``: ``prompt_caching`` of the model, ``cache_seed`` the session
    id or
    ``None`` for the stateless prepare; the previous call's breakpoint from the prefix record's
    ``stable_messages``). A
    request no service compared (the summary model's) gets the record of its own content.
    ``reasoning`` is the model's capability, which its client encodes with (the same bytes).
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
    return {
        "request": prepared.request,
        "budget": budget_to_json(prepared.budget),
        "projection": asdict(prepared.projection),
        "provenance": prepared.provenance,
        "provider_payload": payload,
        "request_digest": request_digest(prepared.prefix_record),
    }


def run_prepare(
    system_context: list[SystemPart],
    conversation: list[Item],
    tools: list[ToolDefinition],
    capabilities: ModelCapabilities,
    pruning: PruningWatermark,
    counter: TokenCounter,
    *,
    encode_as: str | None,
    model_name: str | None = None,
    previous_request_digest: str | None = None,
) -> dict[str, Any]:
    """The stateless prepare: the shared shape plus ``spills``; its stable prefix is measured
    against ``previous_request_digest`` (a ``request_digest`` an earlier answer returned).

    Nothing is stored, so nothing is written to a spill directory either: each full text a spill
    marker of the request names comes back with that path, for the caller to write there
    (spec §2.1; ``docs/decisions.md``). Without a spill directory the list is empty.
    """
    # A malformed digest is refused before anything else is done (422).
    previous = None if previous_request_digest is None else decode_digest(previous_request_digest)
    if counter is ESTIMATE:
        counter = DigestingEstimate()  # measures and digests each message's JSON at once
    # The items were built from this request's body: no later call passes them again.
    prepared = prepare(
        system_context,
        conversation,
        tools,
        capabilities,
        pruning,
        counter,
        remember=False,
        salient=SALIENT_LINES,
    )
    # The caller's ids are not stored rows here: every message is digested from its JSON.
    prepared = prefixed(prepared, conversation, previous, identify_stored=False)
    result = prepared_to_json(
        prepared,
        encode_as=encode_as,
        model_name=model_name,
        prompt_caching=capabilities.prompt_caching,
        cache_seed=None,  # no session: the key follows the tools and the system
        reasoning=capabilities.reasoning,
    )
    result["spills"] = [
        {"tool_call_id": s.tool_call_id, "path": s.path, "text": s.text}
        for s in spills(conversation, pruning, prepared.items)
    ]
    return result
