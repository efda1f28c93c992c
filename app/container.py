"""The composition root's product: every long-lived collaborator, built once per app."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from app.core.counting import ESTIMATE, TokenCounter
from app.core.errors import InvalidInput
from app.services.models import ModelService
from app.settings import Settings

__all__ = ["Container"]


@dataclass
class Container:
    settings: Settings
    models: ModelService = field(default_factory=ModelService)

    def counter(self, name: str) -> TokenCounter:
        return _counter(name, str(self.settings.tokenizer_dir or ""))


@lru_cache(maxsize=8)
def _counter(name: str, data_dir: str) -> TokenCounter:
    if name == "estimate":
        return ESTIMATE
    try:
        from pathlib import Path

        from app.providers.tokenizers import get_counter
    except ImportError as exc:  # pragma: no cover - the tokenizer package ships with the app
        raise InvalidInput(
            "unknown_token_counter", f"token counter {name!r} is unavailable"
        ) from exc
    return get_counter(name, data_dir=Path(data_dir) if data_dir else None)
