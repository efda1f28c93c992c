"""What the service knows about a model: capabilities plus how to reach it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from app.core.capabilities import ModelCapabilities
from app.providers.base import KeyProblem

__all__ = ["READY", "ModelEntry", "ModelReadiness", "ProviderKind", "ProviderSpec"]

ProviderKind = Literal["openai_chat", "anthropic_messages", "openai_responses", "scripted", "local"]


@dataclass(frozen=True, slots=True)
class ProviderSpec:
    kind: ProviderKind
    base_url: str | None = None
    model_name: str | None = None
    api_key_env: str | None = None  # the NAME of an environment variable, never the key itself
    script: list[dict[str, Any]] | None = None  # only for ``scripted``


@dataclass(frozen=True, slots=True)
class ModelEntry:
    id: str
    capabilities: ModelCapabilities
    provider: ProviderSpec
    builtin: bool = False
    script_position: int = 0
    calibration: dict[str, Any] | None = field(default=None)
    # The tenant whose row this is (``SHARED_TENANT`` for a shared model); ``None``: built-in.
    owner: str | None = None


@dataclass(frozen=True, slots=True)
class ModelReadiness:
    """Whether this process can call the model now, in ``/readyz``'s words: ``not_ready`` comes
    with a stable ``code`` and a ``detail`` sentence that says what to do."""

    status: Literal["ready", "not_ready"]
    code: KeyProblem | Literal["invalid_capabilities", "unknown_token_counter"] | None = None
    detail: str | None = None


READY = ModelReadiness("ready")
