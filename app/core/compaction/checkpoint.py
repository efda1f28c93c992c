"""Checkpoints and the compacted projection (spec §7.6, §7.7).

After a compaction the active Conversation is three synthetic user items followed by the
messages after the install boundary:

1. the replay of the last user request (kind ``normal``, origin ``last_user_request_replay``);
2. the summary with its preamble (origin ``compaction_summary``);
3. the runtime reminder (origin ``system_reminder``).

Decision on kinds: all three carry kind ``normal`` — they are sent as plain user messages and
must stay in every summary request (``world_state`` would be dropped from it). What tells them
apart is the synthetic origin's ``reason``: ``select_last_user_request`` accepts only a real
origin or a ``last_user_request_replay`` origin, so a summary or reminder item is never taken
for the user's request, however many compactions follow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from app.core.content import Block, Item, RealOrigin, SyntheticOrigin, text_block
from app.core.errors import Conflict, InvalidInput

__all__ = [
    "SUMMARY_PREAMBLE",
    "Checkpoint",
    "CompactionKind",
    "LastUserRequest",
    "compacted_projection",
    "install_tail",
    "rewind_checkpoint",
    "select_last_user_request",
    "summary_item_text",
]

CompactionKind = Literal["manual", "threshold", "overflow", "rewind"]

SUMMARY_PREAMBLE = (
    "The earlier Conversation was compacted into the following continuation summary. Treat it "
    "as prior conversation context, preserve its uncertainty, and continue from it:\n\n"
)


@dataclass(frozen=True, slots=True)
class LastUserRequest:
    """The request a compaction replays: its stored row and its content."""

    message_id: str | None
    sequence: int | None
    content: list[Block]


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """What the projection, replay and transcript need from a stored checkpoint row."""

    compaction_id: str
    sequence: int
    kind: CompactionKind
    summary: str
    runtime_reminder: str
    last_user: LastUserRequest
    # Fact boundary: the last message the summary covers (transcript read-back stops here).
    through_message_sequence: int
    # Install boundary: messages after it follow the three synthetic items.
    replaced_through_message_sequence: int
    parent_compaction_id: str | None = None
    trigger_turn_id: str | None = None


def select_last_user_request(items: Sequence[Item]) -> LastUserRequest:
    """The last user request in ``items``; ``Conflict`` ``missing_last_user`` when none.

    Qualifies: role user, kind normal, and a real origin or a replay origin (so a second
    compaction replays the same request the first one preserved). Skills, agent messages,
    World State, summaries and reminders never qualify. Decided by kind and origin, never by
    position.
    """
    for item in reversed(items):
        if not item.is_user_request:
            continue
        origin = item.origin
        if isinstance(origin, RealOrigin):
            found = LastUserRequest(origin.message_id, origin.sequence, list(item.content))
        elif origin.reason == "last_user_request_replay":
            found = LastUserRequest(
                origin.source_message_id, origin.source_sequence, list(item.content)
            )
        else:
            continue
        if not found.content:
            break
        return found
    raise Conflict(
        "missing_last_user",
        "the conversation has no user request to preserve; send a message before compacting",
    )


def summary_item_text(summary: str) -> str:
    return SUMMARY_PREAMBLE + summary.strip()


def compacted_projection(checkpoint: Checkpoint, tail_items: Sequence[Item]) -> list[Item]:
    """The active Conversation after ``checkpoint``: replay, summary, reminder, then the tail.

    ``tail_items`` are the stored messages after the install boundary (``install_tail``), kinds
    preserved.
    """
    cid = checkpoint.compaction_id
    last = checkpoint.last_user
    return [
        Item(
            role="user",
            kind="normal",
            content=list(last.content),
            origin=SyntheticOrigin(cid, "last_user_request_replay", last.message_id, last.sequence),
        ),
        Item(
            role="user",
            kind="normal",
            content=[text_block(summary_item_text(checkpoint.summary))],
            origin=SyntheticOrigin(cid, "compaction_summary"),
        ),
        Item(
            role="user",
            kind="normal",
            content=[text_block(checkpoint.runtime_reminder)],
            origin=SyntheticOrigin(cid, "system_reminder"),
        ),
        *tail_items,
    ]


def install_tail(messages: Sequence[Item], checkpoint: Checkpoint) -> list[Item]:
    """The stored messages after the install boundary, in sequence order."""
    boundary = checkpoint.replaced_through_message_sequence
    tail = [m for m in messages if m.sequence is not None and m.sequence > boundary]
    return sorted(tail, key=lambda m: m.sequence or 0)


def rewind_checkpoint(
    target: Checkpoint,
    *,
    compaction_id: str,
    sequence: int,
    current_max_sequence: int,
    runtime_reminder: str,
) -> Checkpoint:
    """The new ``rewind`` checkpoint that reinstalls ``target`` (spec §7.7).

    It copies the target's summary, replay anchor and fact boundary; its install boundary is the
    session's current last message, which hides the abandoned tail without deleting anything.
    The caller re-derives the runtime state (plan ``None``: carried) and renders
    ``runtime_reminder``.
    """
    if current_max_sequence < target.through_message_sequence:
        raise InvalidInput(
            "invalid_rewind",
            f"the session's last message sequence {current_max_sequence} is before checkpoint "
            f"{target.compaction_id}'s boundary {target.through_message_sequence}",
        )
    return Checkpoint(
        compaction_id=compaction_id,
        sequence=sequence,
        kind="rewind",
        summary=target.summary,
        runtime_reminder=runtime_reminder,
        last_user=target.last_user,
        through_message_sequence=target.through_message_sequence,
        replaced_through_message_sequence=current_max_sequence,
        parent_compaction_id=target.compaction_id,
    )
