"""The stateless prepare use case (``POST /v1/prepare``); ``app/api/render/prepare.py`` writes
its JSON."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.capabilities import ModelCapabilities
from app.core.content import Item
from app.core.counting import TokenCounter
from app.core.pipeline.prepare import prepare
from app.core.pipeline.prepared_call import (
    PreparedModelCall,
    PruningWatermark,
    SystemPart,
    ToolDefinition,
)
from app.core.pipeline.prune import Spill, spills
from app.fastjson import ESTIMATE
from app.services.request_prefix import DigestingEstimate, decode_digest, prefixed
from app.services.salient_memo import SALIENT_LINES

__all__ = ["StatelessPrepared", "run_prepare"]


@dataclass(frozen=True, slots=True)
class StatelessPrepared:
    """A stateless prepare's request and the full texts its spill markers name."""

    prepared: PreparedModelCall
    spills: list[Spill]
    capabilities: ModelCapabilities  # what the payload is encoded with
    model_name: str | None


def run_prepare(
    system_context: list[SystemPart],
    conversation: list[Item],
    tools: list[ToolDefinition],
    capabilities: ModelCapabilities,
    pruning: PruningWatermark,
    counter: TokenCounter,
    *,
    model_name: str | None = None,
    previous_request_digest: str | None = None,
) -> StatelessPrepared:
    """The stateless prepare: the request plus its ``spills``; its stable prefix is measured
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
    return StatelessPrepared(
        prepared,
        spills(conversation, pruning, prepared.items),
        capabilities,
        model_name,
    )
