"""The stateless prepare use case (``POST /v1/prepare``) and the JSON shape of a prepared call."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from app.core.capabilities import ModelCapabilities
from app.core.content import Item
from app.core.counting import TokenCounter
from app.core.prepare import prepare
from app.core.prepared import PreparedModelCall, PruningWatermark, SystemPart, ToolDefinition
from app.core.prune import spills
from app.providers.encoding import encode

__all__ = ["prepared_to_json", "run_prepare"]


def prepared_to_json(
    prepared: PreparedModelCall, *, encode_as: str | None, model_name: str | None = None
) -> dict[str, Any]:
    """The response shape shared by ``/v1/prepare``, session prepare and context inspection."""
    payload = None
    if encode_as is not None:
        payload = encode(prepared.request, encode_as, model=model_name)  # type: ignore[arg-type]
    return {
        "request": prepared.request,
        "budget": asdict(prepared.budget),
        "projection": asdict(prepared.projection),
        "provenance": prepared.provenance,
        "provider_payload": payload,
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
) -> dict[str, Any]:
    """The stateless prepare: the shared shape plus ``spills``.

    Nothing is stored, so nothing is written to a spill directory either: each full text a spill
    marker of the request names comes back with that path, for the caller to write there
    (SPEC §2.1; ``docs/decisions.md``). Without a spill directory the list is empty.
    """
    # The items were built from this request's body: no later call passes them again.
    prepared = prepare(
        system_context, conversation, tools, capabilities, pruning, counter, remember=False
    )
    result = prepared_to_json(prepared, encode_as=encode_as, model_name=model_name)
    result["spills"] = [
        {"tool_call_id": s.tool_call_id, "path": s.path, "text": s.text}
        for s in spills(conversation, pruning, prepared.items)
    ]
    return result
