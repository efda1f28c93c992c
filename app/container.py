"""The composition root's product: every long-lived collaborator, built once per app."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncEngine

from app.api.observability import Metrics
from app.core.counting import TokenCounter
from app.providers.tokenizers import get_counter
from app.services.events import EventHub, EventPublisher
from app.services.inspection import InspectionService
from app.services.messages import MessageService
from app.services.model_clients import ModelClients
from app.services.models import ModelService
from app.services.sessions import SessionService
from app.settings import Settings
from app.storage.database import SessionFactory, create_engine, create_session_factory

__all__ = ["Container"]


@dataclass
class Container:
    settings: Settings
    engine: AsyncEngine
    db: SessionFactory
    metrics: Metrics = field(default_factory=Metrics)

    def __post_init__(self) -> None:
        self.models = ModelService(self.db)
        self.sessions = SessionService(self.db, self.settings)
        self.messages = MessageService(self.db, self.counter)
        self.inspection = InspectionService(self.db, self.counter)
        self.model_clients = ModelClients(self.db)
        self.events = EventPublisher(EventHub())

    @classmethod
    def build(cls, settings: Settings) -> Container:
        engine = create_engine(settings.database_url)
        return cls(settings=settings, engine=engine, db=create_session_factory(engine))

    async def aclose(self) -> None:
        await self.model_clients.aclose()
        await self.engine.dispose()

    def counter(self, name: str) -> TokenCounter:
        """The named counter; exact counters load (and verify) their data once per process."""
        return get_counter(name, data_dir=self.settings.tokenizer_dir)
