"""What the turn service needs from the composition root (a structural type, so the service does
not import the container that builds it)."""

from __future__ import annotations

from typing import Protocol

from app.core.counting import TokenCounter
from app.observability import Observability
from app.services.conversation_cache import ConversationCache
from app.services.events import EventPublisher
from app.services.model_clients import ModelClients
from app.services.ports import TurnCompactor, WorldStateSampling
from app.settings import Settings
from app.storage.database import SessionFactory
from app.storage.outages import Outages

__all__ = ["TurnDeps", "compactor_of", "world_state_of"]


class TurnDeps(Protocol):
    settings: Settings
    db: SessionFactory
    model_clients: ModelClients
    events: EventPublisher
    observability: Observability
    conversations: ConversationCache  # the process's last reads, shared with inspection
    outages: Outages  # database outages: the sweepers log them once, not per sweep

    def counter(self, name: str) -> TokenCounter: ...


def world_state_of(deps: TurnDeps) -> WorldStateSampling | None:
    # Looked up at call time: the sampler is registered by its own service, possibly after us.
    sampler: WorldStateSampling | None = getattr(deps, "world_state", None)
    return sampler


def compactor_of(deps: TurnDeps) -> TurnCompactor | None:
    compactor: TurnCompactor | None = getattr(deps, "compactor", None)
    return compactor
