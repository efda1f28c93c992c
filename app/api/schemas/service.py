"""The service endpoints' answers (liveness and readiness)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Health", "ProviderReachability", "Readiness"]


class Health(BaseModel):
    """The process is alive."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"status": "ok"}]})

    status: Literal["ok"]


class ProviderReachability(BaseModel):
    """One provider address probed by `/readyz?providers=true`."""

    base_url: str = Field(description="The address probed, without credentials or query.")
    models: list[str] = Field(description="The callable models behind it.")
    reachable: bool
    detail: str | None = Field(
        default=None, description="Why it did not answer (only when `reachable` is false)."
    )


class Readiness(BaseModel):
    """The database is reachable and migrated (and, when asked, every provider answers)."""

    status: Literal["ready"]
    providers: list[ProviderReachability] | None = Field(
        default=None, description="Only with `providers=true`: one entry per provider address."
    )
