"""Model registry: the built-in catalogue plus models registered through the API."""

from __future__ import annotations

from app.core.errors import NotFound
from app.services.catalogue import CATALOGUE
from app.services.model_types import ModelEntry

__all__ = ["ModelService"]


class ModelService:
    def __init__(self, catalogue: dict[str, ModelEntry] | None = None) -> None:
        self._catalogue = dict(CATALOGUE if catalogue is None else catalogue)

    async def get(self, model_id: str) -> ModelEntry:
        entry = self._catalogue.get(model_id)
        if entry is None:
            raise NotFound(
                "model_not_found",
                f"no model {model_id!r}; GET /v1/models lists them, PUT /v1/models/{{id}} adds one",
            )
        return entry

    async def list(self) -> list[ModelEntry]:
        return sorted(self._catalogue.values(), key=lambda e: e.id)
