"""A caller's summary keeps the user's facts of the checkpoint it replaces (spec §7.8).

The previous summary is the ``compaction_summary`` item of the source's active conversation —
known by its stored origin, never by its text — and ``app.core.compaction.user_facts`` says
what of it the user said. Nothing is checked on a session's first checkpoint, nor after a new
epoch (no summary is in force), nor when the caller accepts the loss
(``accept_dropped_user_facts``).
"""

from __future__ import annotations

from collections.abc import Sequence

from app.core.compaction.checkpoint import SUMMARY_PREAMBLE
from app.core.compaction.user_facts import (
    dropped_user_facts,
    summary_drops_user_facts,
    user_facts_of,
)
from app.core.content import Item, SyntheticOrigin

__all__ = ["require_user_facts"]


def _previous_summary(items: Sequence[Item]) -> tuple[str, str] | None:
    """``(compaction id, summary)`` of the summary item in force, if any."""
    for item in items:
        origin = item.origin
        if isinstance(origin, SyntheticOrigin) and origin.reason == "compaction_summary":
            text = "".join(b["text"] for b in item.content if b["type"] == "text")
            return origin.compaction_id or "", text.removeprefix(SUMMARY_PREAMBLE)
    return None


def require_user_facts(items: Sequence[Item], summary: str) -> None:
    """Raise ``summary_drops_user_facts`` when ``summary`` drops the user facts of the summary
    in force among ``items`` (the source's active conversation)."""
    previous = _previous_summary(items)
    if previous is None:
        return
    compaction_id, text = previous
    dropped = dropped_user_facts(summary, user_facts_of(text))
    if dropped.identifiers or dropped.constraints:
        raise summary_drops_user_facts(dropped, compaction_id)
