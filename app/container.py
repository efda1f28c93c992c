"""The composition root's product: every long-lived collaborator, built once per app."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from opentelemetry.sdk.trace import TracerProvider
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.counting import TokenCounter
from app.core.limits.rates import TokenBuckets
from app.observability import Metrics, Observability, pool_figures
from app.providers.base import Timeouts
from app.providers.tokenizers import get_counter
from app.services.calibration import CalibrationService
from app.services.compaction import CompactionService
from app.services.conversation_cache import ConversationCache
from app.services.events import EventHub, EventPublisher
from app.services.inspection import InspectionService
from app.services.messages import MessageService
from app.services.model_clients import ModelClients
from app.services.models import ModelService
from app.services.pins import PinService
from app.services.proxy.service import ProxyService
from app.services.session_items import SessionItemService
from app.services.session_prepare import SessionPrepareService
from app.services.sessions import SessionService
from app.services.tenancy import KeyService
from app.services.tokens import MemoizedCounter
from app.services.turns import AgentMessageService, TurnService
from app.services.world_state import WorldStateSampler
from app.settings import Settings
from app.storage.committed_writes import notify_committed_writes
from app.storage.database import (
    PoolSettings,
    SessionFactory,
    create_engine,
    create_session_factory,
)
from app.storage.outages import Outages

__all__ = ["VERSION", "Container"]

VERSION = "0.1.0"


@dataclass
class Container:
    settings: Settings
    engine: AsyncEngine
    db: SessionFactory
    observability: Observability = field(default_factory=Observability)
    # Tests wrap the real counters (e.g. to count tokenizer calls); None = ``get_counter``.
    counter_factory: Callable[[str], TokenCounter] | None = None

    def __post_init__(self) -> None:
        self._memoized: dict[str, TokenCounter] = {}
        # Database outages seen by requests and sweepers: one log line each, readiness.
        self.outages = Outages(self.settings.database_url)
        # Only a committed write proves a write outage over (not any 2xx: spec §8).
        notify_committed_writes(self.engine, self.outages.writes_succeeded)
        # /metrics reads the pool's figures at scrape time.
        self.metrics.pool_probe = partial(pool_figures, self.engine.pool)
        self.observability.instrument_engine(self.engine)
        self.models = ModelService(
            self.db, allow_private_hosts=self.settings.allow_private_model_hosts
        )
        self.tenancy = KeyService(self.db)
        self.rate_limits = (
            TokenBuckets(self.settings.rate_limit_requests, self.settings.rate_limit_window_seconds)
            if self.settings.rate_limit_requests > 0
            else None
        )
        self.sessions = SessionService(self.db, self.settings, self.counter)
        self.events = EventPublisher(EventHub())
        # The process's last read of each session's Conversation: turns, inspection and session
        # prepare decode only what was stored since.
        self.conversations = ConversationCache(self.settings.conversation_cache_bytes)
        self.messages = MessageService(self.db, self.counter, self.events)
        self.session_items = SessionItemService(self.db, self.messages)
        self.pins = PinService(self.db, self.events)
        self.calibration = CalibrationService(self.db, apply=self.settings.apply_calibration)
        self.inspection = InspectionService(
            self.db,
            self.counter,
            self.conversations,
            apply_calibration=self.settings.apply_calibration,
        )
        self.world_state = WorldStateSampler(self.settings, observability=self.observability)
        self.session_prepare = SessionPrepareService(
            self.db,
            self.counter,
            self.world_state,
            lambda: getattr(self, "compactor", None),
            self.events,
            self.conversations,
            apply_calibration=self.settings.apply_calibration,
        )
        self.model_clients = ModelClients(
            self.db,
            timeouts=Timeouts(total=self.settings.provider_timeout_seconds),
            observability=self.observability,
            allow_private_hosts=self.settings.allow_private_model_hosts,
        )
        self.compactor = CompactionService(
            self.db,
            self.counter,
            self.model_clients,
            self.events,
            self.settings,
            self.observability.compactions,
        )
        self.proxy = ProxyService(
            self.db,
            self.settings,
            self.sessions,
            self.messages,
            self.session_prepare,
            self.model_clients,
            self.tenancy,
            self.observability,
        )
        self.turns = TurnService(self)
        self.agent_messages = AgentMessageService(self)

    @property
    def metrics(self) -> Metrics:
        return self.observability.metrics

    @classmethod
    def build(
        cls,
        settings: Settings,
        *,
        counter_factory: Callable[[str], TokenCounter] | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> Container:
        """``tracer_provider``: the app's traces (tests pass one with an in-memory exporter);
        otherwise the ``OTEL_*`` environment variables decide (off unless they ask)."""
        pool = PoolSettings(
            size=settings.db_pool_size,
            max_overflow=settings.db_pool_max_overflow,
            timeout=settings.db_pool_timeout_seconds,
            recycle=settings.db_pool_recycle_seconds,
        )
        engine = create_engine(settings.database_url, pool)
        db = create_session_factory(engine)
        observability = (
            Observability(tracer_provider=tracer_provider)
            if tracer_provider is not None
            else Observability.from_env(os.environ, version=VERSION)
        )
        return cls(
            settings=settings,
            engine=engine,
            db=db,
            observability=observability,
            counter_factory=counter_factory,
        )

    async def aclose(self) -> None:
        await self.proxy.aclose()  # answers still being written, before the database closes
        await self.model_clients.aclose()
        await self.engine.dispose()
        await self.observability.aclose()

    def counter(self, name: str) -> TokenCounter:
        """The named counter; exact counters load (and verify) their data once per process."""
        if self.counter_factory is not None:
            return self.counter_factory(name)
        counter = get_counter(name, data_dir=self.settings.tokenizer_dir)
        if counter.name == "estimate":
            return counter  # cheaper to measure than to look up
        # One memo per exact counter for the app's life (see ``MemoizedCounter``).
        return self._memoized.setdefault(counter.name, MemoizedCounter(counter))
