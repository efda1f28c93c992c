"""A compaction must make the conversation smaller (SPEC §9.3).

On a short history a summary (its fixed headings and texts, the replay, the reminder) can be
longer than the conversation it replaces: 108 → 411 tokens was seen. An in-turn compaction
(``threshold``, ``overflow``) that does not reduce the conversation is therefore not installed:
the turn goes on with the request as it was when that request fits the model, and fails with
``compaction_error`` otherwise (an overflow always: the provider already said it does not fit).
A manual compaction (and a rewind) is installed as asked; its checkpoint says whether it shrank
anything (``shrink_notice``).
"""

from __future__ import annotations

from app.core.errors import Conflict
from app.core.prepared import Budget

__all__ = ["CompactionNotSmaller", "not_installed_detail", "refusal_of", "shrink_notice"]


class CompactionNotSmaller(Conflict):
    """An in-turn compaction whose conversation would not be smaller: not installed."""

    def __init__(self, kind: str, before: int, after: int) -> None:
        super().__init__(
            "compaction_not_smaller",
            f"the {kind} compaction would not reduce the conversation ({before} → {after} "
            "tokens), so it was not installed",
            kind=kind,
            conversation_tokens_before=before,
            conversation_tokens_after=after,
        )
        self.compaction_kind = kind
        self.before = before
        self.after = after


def refusal_of(kind: str, before: int, after: int) -> CompactionNotSmaller | None:
    """The refusal of an in-turn compaction that does not shrink the conversation, if it is."""
    if kind in ("threshold", "overflow") and after >= before:
        return CompactionNotSmaller(kind, before, after)
    return None


def not_installed_detail(refused: CompactionNotSmaller, budget: Budget) -> str:
    """Why the turn fails after a refused compaction (code ``compaction_error``)."""
    if refused.compaction_kind == "overflow":
        why = "the provider reported the request too large"
    else:
        why = (
            f"the request needs {budget.estimated_input_tokens} input tokens but the model "
            f"accepts {budget.effective_input_tokens}"
        )
    return (
        f"{refused.detail}; {why}. The conversation is already shorter than its summary would "
        "be: shorten the system prompt, the tools or the latest message, or use a model with "
        "a larger window"
    )


def shrink_notice(kind: str, before: int | None, after: int | None) -> str | None:
    """What a stored checkpoint tells its caller when it did not shrink the conversation."""
    if before is None or after is None or after < before:
        return None
    return (
        f"this {kind} compaction did not shrink the conversation ({before} → {after} tokens): "
        "its summary, replay and reminder are as long as what they replaced or longer"
    )
