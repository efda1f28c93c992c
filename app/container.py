"""The composition root's product: every long-lived collaborator, built once per app."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.core.counting import TokenCounter
from app.providers.tokenizers import get_counter
from app.services.models import ModelService
from app.settings import Settings

__all__ = ["Container"]


@dataclass
class Container:
    settings: Settings
    models: ModelService = field(default_factory=ModelService)

    def counter(self, name: str) -> TokenCounter:
        """The named counter; exact counters load (and verify) their data once per process."""
        return get_counter(name, data_dir=self.settings.tokenizer_dir)
