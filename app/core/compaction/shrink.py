"""A compaction must make the conversation smaller (spec §9.3).

On a short history a summary (its fixed headings and texts, the replay, the reminder) can be
longer than the conversation it replaces: 108 → 411 tokens was seen. An in-turn compaction
(``threshold``, ``overflow``) that does not reduce the conversation is therefore not installed:
the turn goes on with the request as it was when that request fits the model, and fails with
``compaction_error`` otherwise (an overflow always: the provider already said it does not fit).
A manual compaction (``POST …/compactions``, with the service's summary or the caller's own) that
does not reduce the conversation is refused the same way (409 ``compaction_not_smaller``, nothing
stored) unless the caller asks for it with ``allow_larger`` (docs/compaction-trust.md): then it
is installed and its checkpoint says it did not shrink anything (``shrink_notice``). A rewind
reinstalls a checkpoint as asked.
"""

from __future__ import annotations

from app.core.errors import Conflict
from app.core.pipeline.prepared_call import Budget

__all__ = ["CompactionNotSmaller", "not_installed_detail", "refusal_of", "shrink_notice"]


class CompactionNotSmaller(Conflict):
    """A compaction whose conversation would not be smaller: not installed."""

    def __init__(self, kind: str, before: int, after: int) -> None:
        hint = "; send allow_larger: true to install it anyway" if kind == "manual" else ""
        super().__init__(
            "compaction_not_smaller",
            f"the {kind} compaction would not reduce the conversation ({before} → {after} "
            f"tokens), so it was not installed{hint}",
            kind=kind,
            conversation_tokens_before=before,
            conversation_tokens_after=after,
        )
        self.compaction_kind = kind
        self.before = before
        self.after = after


def refusal_of(
    kind: str, before: int, after: int, *, allow_larger: bool = False
) -> CompactionNotSmaller | None:
    """The refusal of a compaction that does not shrink the conversation, if it is one: an
    in-turn one always, a manual one unless ``allow_larger``."""
    refusable = kind in ("threshold", "overflow") or (kind == "manual" and not allow_larger)
    if refusable and after >= before:
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
