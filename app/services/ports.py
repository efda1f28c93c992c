"""What the turn runner needs from World State sampling and from compaction.

Declared here so that the runner, the sampler and the compaction service can be built and tested
independently; the composition root passes the real implementations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.content import Item
from app.services.budget import TurnCallEvidence
from app.storage.models import AgentSession

__all__ = ["TurnCompactor", "WorldStateSampling"]


class WorldStateSampling(Protocol):
    async def sample(
        self,
        db: AsyncSession,
        session: AgentSession,
        conversation: Sequence[Item],
        *,
        turn_id: str,
        model_call_index: int,
        sample_index: int,
    ) -> list[Item]:
        """Capture, diff against the stored baselines and ``conversation``, write each changed
        section as a ``world_state`` message (insert-if-absent by its spec §4 id), advance the
        baselines, and return the written items (to append to the conversation). Raises a
        ``ServiceError`` with ``user_project_context_error | project_instruction_error |
        skill_catalog_error`` before writing anything when capture fails."""
        ...


class TurnCompactor(Protocol):
    async def prune(self, session_id: str) -> bool:
        """spec §7.2: advance the pruning watermark (own transaction); ``True`` if it moved.
        Any failure means "no pruning this time" (logged), never an exception."""
        ...

    async def compact_in_turn(
        self,
        session_id: str,
        *,
        trigger: Literal["threshold", "overflow"],
        turn_id: str,
        evidence: TurnCallEvidence | None,
    ) -> None:
        """Summarize and install a checkpoint linked to the running turn (own transactions).
        Raises ``CompactionNotSmaller`` when the summary would not shrink the conversation
        (nothing installed: the caller goes on without it if its request fits), any other
        ``ServiceError`` on failure (the runner fails the turn with ``compaction_error``)."""
        ...

    async def compact_for_prepare(
        self, session_id: str, *, prepare_id: str, evidence: TurnCallEvidence
    ) -> None:
        """The same for a session prepare that reached the trigger line (``threshold``): no
        turn runs, so the checkpoint names ``prepare_id`` instead. Raises ``ServiceError``
        (``CompactionNotSmaller`` when nothing was installed because it would not shrink)."""
        ...
