"""The prepare pipeline (spec §2): composes the stages, adds nothing of its own.

Order: capabilities → prune (§2.1) → project (§2.2) → normalize (§2.3) → validate (§2.4) →
budget (§3.1, §3.2) → assemble (§2.4). Pure and deterministic: no I/O, no clock, the input is
never mutated (stages copy on write), and the same input gives byte-identical output.

A turn calls this once per model call, so the Conversation's stages run in one pass over it
(``single_pass``) with the very result of running them one after another; errors keep the order
above: data blocks (normalize), then the system context, then a system message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.core.capabilities import ModelCapabilities
from app.core.content import Item
from app.core.counting import ESTIMATE, TokenCounter
from app.core.pipeline.assemble import measure_system_context, system_message_in_conversation
from app.core.pipeline.budget import budget_of
from app.core.pipeline.one_pass.conversation import EarlierPass, single_pass
from app.core.pipeline.prepared_call import (
    PreparedModelCall,
    PruningWatermark,
    RequestMessage,
    SystemPart,
    ToolDefinition,
)
from app.core.pipeline.salient import SalientLineMemo

__all__ = ["prepare"]

_NO_PRUNING = PruningWatermark()


def prepare(
    system_context: Sequence[SystemPart],
    conversation: Sequence[Item],
    tools: Sequence[ToolDefinition],
    capabilities: ModelCapabilities,
    pruning: PruningWatermark = _NO_PRUNING,
    counter: TokenCounter = ESTIMATE,
    *,
    remember: bool = True,
    extends: PreparedModelCall | None = None,
    salient: SalientLineMemo | None = None,
) -> PreparedModelCall:
    """Turn the three regions and the model's capabilities into a ``PreparedModelCall``.

    ``remember=False``: the caller will never pass these very items again (a stateless
    request's), so the result carries no walk for a later call to carry on from
    (``app/core/pipeline/one_pass/continuation.py``).
    ``extends``: an earlier call's result (the session's previous model call): its walk of the
    conversation's beginning is carried on, and the messages and measures of the leading
    normalized items that are its very objects are taken from it, when it was measured by this
    very counter — what building them again would give.
    ``salient``: the caller's memo of the salient lines of cut texts (``salient.py``; ``None``:
    found afresh) — what finding them again would give.
    Raises ``InvalidInput`` with the codes of spec §2–3 (``invalid_capabilities`` first).
    """
    limits = capabilities.limits()  # fail before anything else is looked at
    sent = single_pass(
        conversation,
        pruning,
        accepts_data_blocks=capabilities.accepts_data_blocks,
        counter_name=counter.name,
        remember=remember,
        extends=_earlier(extends, counter),
        salient=salient,
    )
    system_measure = measure_system_context(system_context, counter)  # validates it too
    if sent.system_message_at is not None:
        index = sent.system_message_at
        raise system_message_in_conversation(index, conversation[index])
    items = sent.items
    measures = sent.measures
    sent_messages = sent.messages
    for index in sent.unmeasured:
        # The content as sent (artifacts removed: spec §1), as the budget stage measures it:
        # the very lists of the request, which the prefix record digests next.
        content = sent_messages[index]["content"]
        measures[index] = counter.measure_message(items[index].role, content)
    budget = budget_of(system_measure, sum(measures), tools, limits, counter)
    messages: list[RequestMessage] = [
        {"role": "system", "content": part.content} for part in system_context
    ]
    messages += sent.messages
    request: dict[str, Any] = {
        "messages": messages,
        "tools": list(tools),
        # The output reserve is the output limit the request sends (spec §3.2).
        "max_output_tokens": limits.output_reserve_tokens,
    }
    return PreparedModelCall(
        request,
        budget,
        sent.report,
        items,
        measures,
        counter,
        pruned_through_sequence=pruning.through_sequence,
        walk=sent.walk,
        shared_with=extends.items if sent.shared and extends is not None else None,
        shares=sent.shared,
    )


def _earlier(prepared: PreparedModelCall | None, counter: TokenCounter) -> EarlierPass | None:
    if prepared is None:
        return None
    if prepared.counter is not counter:  # its measures are another counter's: only its walk
        return EarlierPass((), (), (), prepared.walk)
    messages = prepared.request["messages"]
    return EarlierPass(
        prepared.items,
        messages[len(messages) - len(prepared.items) :],
        prepared.measures,
        prepared.walk,
    )
