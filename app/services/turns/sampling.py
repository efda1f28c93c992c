"""World State in the runner's steps: the workspace is read before a step's transaction opens,
and only written inside it (``WorldStateSampler``'s two phases).

A step holds the session's row lock (and on SQLite the database's write lock) while it runs, so
reading a server directory there would hold every writer of the database up for the length of
the read. The inputs are used only if the session's workspace setting is still the one they were
read for when the step has the session locked; otherwise (a PATCH in between) the step samples
as one operation, as it would without a two-phase sampler.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard, runtime_checkable

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.content import Item
from app.core.world_state import WorkspaceInputs
from app.services.turns.deps import TurnDeps, world_state_of
from app.storage.models import AgentSession

__all__ = ["Captured", "TwoPhaseSampling", "capture", "is_two_phase", "sample"]


@runtime_checkable
class TwoPhaseSampling(Protocol):
    def capture_reads_files(self, session: AgentSession) -> bool:
        """Whether ``capture`` reads the filesystem for ``session`` (else it only computes)."""
        ...

    async def capture(self, session: AgentSession) -> WorkspaceInputs: ...

    async def write(
        self,
        db: AsyncSession,
        session: AgentSession,
        conversation: Sequence[Item],
        inputs: WorkspaceInputs,
        *,
        turn_id: str,
        model_call_index: int,
        sample_index: int,
    ) -> list[Item]: ...


_TWO_PHASE_MEMBERS = ("capture_reads_files", "capture", "write")


def is_two_phase(sampler: object) -> TypeGuard[TwoPhaseSampling]:
    """``isinstance(sampler, TwoPhaseSampling)``: the same test (the protocol's members are
    there), without ``typing``'s runtime protocol check, which costs tens of microseconds a call
    on Python 3.11 and ran two or three times per model call."""
    return all(hasattr(sampler, name) for name in _TWO_PHASE_MEMBERS)


@dataclass(frozen=True, slots=True)
class Captured:
    workspace: dict[str, Any] | None  # the setting the inputs were read for
    inputs: WorkspaceInputs


async def capture(deps: TurnDeps, session: AgentSession) -> Captured | None:
    """The session's workspace inputs now (raises the sampler's ``ServiceError``), or ``None``
    when there is no sampler or it samples in one operation only."""
    sampler = world_state_of(deps)
    if not is_two_phase(sampler):
        return None
    return Captured(session.workspace, await sampler.capture(session))


async def sample(
    deps: TurnDeps,
    db: AsyncSession,
    session: AgentSession,
    conversation: Sequence[Item],
    captured: Captured | None,
    *,
    turn_id: str,
    model_call_index: int,
    sample_index: int,
) -> list[Item]:
    """Write the sample in ``db``'s transaction; returns the written items."""
    sampler = world_state_of(deps)
    if sampler is None:
        return []
    if captured is not None and captured.workspace == session.workspace and is_two_phase(sampler):
        return await sampler.write(
            db,
            session,
            conversation,
            captured.inputs,
            turn_id=turn_id,
            model_call_index=model_call_index,
            sample_index=sample_index,
        )
    return await sampler.sample(
        db,
        session,
        conversation,
        turn_id=turn_id,
        model_call_index=model_call_index,
        sample_index=sample_index,
    )
