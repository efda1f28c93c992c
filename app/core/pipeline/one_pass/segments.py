"""Stages 1–3 of ``prepare`` in one walk over whole segments (spec §2.1–§2.3).

A *segment* is a non-tool message and the tool messages right after it. Pruning and projection
map each message on its own and normalize treats each segment on its own, so the stages' result
for a conversation is the concatenation of their results for its segments; a walk can cover any
run of whole segments, and two walks can be joined (``Walked.then``).

Almost every segment takes the usual way: an assistant message followed by one short result per
call, in call order (or a user message). The stages change none of these messages, so the walk
only checks that they are usual and keeps them. Every other segment (an oversized result, a data
block to filter, a missing, orphan, duplicate or renamed result) goes through the stages' own
code (``tool_messages.py``, ``pipeline/normalize.py``), so each rule lives in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import add

from app.core.content import Block, Item, content_without_artifacts
from app.core.pipeline.assemble import CONVERSATION_ROLES
from app.core.pipeline.normalize import Normalizer
from app.core.pipeline.one_pass.tool_messages import UNCHANGED_CHARS, ToolResultRewriter
from app.core.pipeline.prepared_call import ProjectionReport, PruningWatermark
from app.core.pipeline.salient import SalientLineMemo

__all__ = ["Walked", "walk"]


@dataclass(frozen=True, slots=True)
class Walked:
    """The normalized messages of whole segments, and what the stages reported on the way."""

    items: tuple[Item, ...]
    artifacts: tuple[int, ...]  # indexes in ``items`` of the messages that carry artifacts
    # Their content as sent (artifacts removed), built once per walk: a remembered walk hands
    # out the very same lists again, so the adapter's memo of encoded messages
    # (``app/providers/encoding/wire.py``) knows them.
    stripped: tuple[list[Block], ...]
    # The counts of ``ProjectionReport``, in its field order (a tuple: a walk may be remembered).
    counts: tuple[int, ...]
    # Index in the caller's conversation (not in ``items``: dropped orphans would shift it) of
    # the first message of another role, as errors name items (``data_blocks_not_accepted``).
    system_message_at: int | None

    def then(self, later: Walked) -> Walked:
        """This walk followed by ``later``, the walk of the segments right after it."""
        offset = len(self.items)
        earlier = self.system_message_at
        return Walked(
            self.items + later.items,
            self.artifacts + tuple(index + offset for index in later.artifacts),
            self.stripped + later.stripped,
            tuple(map(add, self.counts, later.counts)),
            later.system_message_at if earlier is None else earlier,
        )

    def report(self) -> ProjectionReport:
        """A new report (the caller may change it; a walk may be remembered)."""
        pruned, truncated, original, projected, synthesized, dropped, filtered = self.counts
        return ProjectionReport(
            pruned_tool_results=pruned,
            truncated_tool_results=truncated,
            original_tokens=original,
            projected_tokens=projected,
            synthesized_tool_results=synthesized,
            dropped_orphan_results=dropped,
            filtered_data_blocks=filtered,
        )


def walk(
    conversation: Sequence[Item],
    start: int,
    stop: int,
    pruning: PruningWatermark,
    accepts_data_blocks: bool,
    salient: SalientLineMemo | None = None,
) -> Walked:
    """Prune, project and normalize ``conversation[start:stop]``, whole segments (``salient``:
    the caller's memo of salient lines found, ``app/core/pipeline/salient.py``).

    ``start`` is 0 or the index of a non-tool message; so is ``stop``, or it is the length.
    Raises what normalize raises, with the message's index in ``conversation``.
    """
    rewriter = ToolResultRewriter(pruning, salient)
    normalizer = Normalizer(accepts_data_blocks)
    items: list[Item] = []
    artifacts: list[int] = []
    system_message_at: int | None = None
    i = start
    while i < stop:
        head = conversation[i]
        role = head.role
        i += 1
        if role == "tool":
            # Not in an assistant message's run: an orphan. Still rewritten, as the earlier
            # stages would have done (their counts include it), then dropped.
            normalizer.drop_orphan(rewriter.rewrite(head))
            continue
        if role not in CONVERSATION_ROLES and system_message_at is None:
            system_message_at = i - 1
        kept = head if accepts_data_blocks else normalizer.filter_item(head, i - 1)
        end = _usual_run_end(head, conversation, i, stop) if role == "assistant" else -1
        if end >= 0:
            # The usual way: sent as they are. Only their tool results can carry artifacts (the
            # assistant message holds none: checked).
            items.append(kept)
            for index in range(i, end):
                tool_item = conversation[index]
                if "artifacts" in tool_item.content[0]:
                    artifacts.append(len(items))
                items.append(tool_item)
            i = end
            continue
        for block in kept.content:
            if block["type"] == "tool_result" and "artifacts" in block:
                artifacts.append(len(items))
                break
        items.append(kept)
        if role != "assistant":
            continue  # any tool message after it is an orphan
        end = i
        while end < stop and conversation[end].role == "tool":
            end += 1
        run = [rewriter.rewrite(tool_item) for tool_item in conversation[i:end]]
        # A normalized tool message holds exactly one block, its tool result.
        for tool_item in normalizer.pair(head, run):
            if "artifacts" in tool_item.content[0]:
                artifacts.append(len(items))
            items.append(tool_item)
        i = end
    return Walked(
        tuple(items),
        tuple(artifacts),
        tuple(content_without_artifacts(items[index].content) for index in artifacts),
        (
            rewriter.pruned,
            rewriter.truncated,
            rewriter.original_tokens,
            rewriter.projected_tokens,
            normalizer.synthesized,
            normalizer.dropped,
            normalizer.filtered,
        ),
        system_message_at,
    )


def _usual_run_end(assistant: Item, conversation: Sequence[Item], start: int, stop: int) -> int:
    """Where the assistant's results end if the stages keep them as they are, else -1.

    Usual: one tool message per call, in call order, each holding one result with the call's id
    and name and one text block shorter than ``UNCHANGED_CHARS`` (so neither pruned, projected
    nor filtered), and no call id repeated (only its first result would be used); the assistant
    message itself holds no tool result (none ever does). ``Normalizer.pair`` keeps exactly these
    messages, in this order. A tool message after them holds only duplicate or unknown results:
    ``pair`` would drop and count each, which is what the walk does with it as an orphan.
    """
    end = start
    first_id: str | None = None
    later_ids: set[str] | None = None  # built only for a second call: most have one
    for block in assistant.content:
        if block["type"] != "tool_call":
            if block["type"] == "tool_result":
                return -1  # not where it belongs: its artifacts need looking at
            continue
        if end == stop:
            return -1
        tool_item = conversation[end]
        content = tool_item.content
        if tool_item.role != "tool" or len(content) != 1:
            return -1
        result = content[0]
        call_id = block["id"]
        if (
            result["type"] != "tool_result"
            or result["id"] != call_id
            or result["name"] != block["name"]
        ):
            return -1
        output = result["output"]
        if len(output) != 1 or output[0]["type"] != "text":
            return -1
        if len(output[0]["text"]) >= UNCHANGED_CHARS:
            return -1
        if first_id is None:
            first_id = call_id
        else:
            if later_ids is None:
                later_ids = {first_id}
            if call_id in later_ids:
                return -1
            later_ids.add(call_id)
        end += 1
    return end
