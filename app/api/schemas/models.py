"""Model capabilities as the API carries them (API.md ``model``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.core.capabilities import ModelCapabilities

__all__ = [
    "MODEL_NAME_MAX_LENGTH",
    "CapabilitiesIn",
    "InlineModelIn",
    "ModelIn",
    "ModelOut",
    "ModelReadinessOut",
    "ProviderIn",
    "TokenCounterName",
]

TokenCounterName = Literal["estimate", "tiktoken:o200k_base", "tiktoken:cl100k_base"]

# A provider's model id (``gpt-5``, ``claude-sonnet-4-5``, ``org/model:tag``); the same bound as
# the service's own model ids.
MODEL_NAME_MAX_LENGTH = 200


class CapabilitiesIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    context_window_tokens: int = Field(gt=0, examples=[1000])
    max_output_tokens: int = Field(gt=0, examples=[400])
    max_reasoning_tokens: int | None = Field(default=None, ge=0)
    accepts_data_blocks: bool = True
    fixed_reserve_tokens: int = Field(default=0, ge=0)
    safety_margin_tokens: int = Field(default=0, ge=0)
    token_counter: TokenCounterName = "estimate"

    def to_core(self) -> ModelCapabilities:
        caps = ModelCapabilities(**self.model_dump(include=set(CapabilitiesIn.model_fields)))
        caps.limits()  # refuse reserves that consume the window before anything else happens
        return caps


class InlineModelIn(CapabilitiesIn):
    """The stateless body's inline ``model``: capabilities plus, optionally, the provider's name
    for the model, which an encoded ``provider_payload`` then carries as ``model``."""

    model_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=MODEL_NAME_MAX_LENGTH,
        description="The provider's model id, sent as `model` in an encoded `provider_payload`.",
        examples=["gpt-5"],
    )


class ProviderIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["openai_chat", "anthropic_messages", "scripted", "local"]
    base_url: str | None = Field(default=None, examples=["https://api.openai.com/v1"])
    model_name: str | None = Field(default=None, examples=["gpt-5"])
    api_key_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="The NAME of the environment variable holding the key; keys never travel "
        "in request bodies. Omit it for a server that needs no key (a local Ollama, vLLM or "
        "llama.cpp): no authentication header is sent.",
        examples=["OPENAI_API_KEY"],
    )
    script: list[dict[str, Any]] | None = Field(
        default=None, description="Only for `scripted`: the entries replayed one per model call."
    )

    @model_validator(mode="after")
    def _kind_needs(self) -> ProviderIn:
        http = self.kind in ("openai_chat", "anthropic_messages")
        if http and (not self.base_url or not self.model_name):
            raise ValueError(f"provider kind {self.kind} needs base_url and model_name")
        if self.kind == "scripted" and self.script is None:
            raise ValueError("provider kind scripted needs a script (a list of entries)")
        if self.kind != "scripted" and self.script is not None:
            raise ValueError("only the scripted kind takes a script")
        return self


class ModelIn(CapabilitiesIn):
    provider: ProviderIn


class ModelReadinessOut(BaseModel):
    status: Literal["ready", "not_ready"]
    code: Literal["api_key_missing"] | None = Field(
        default=None, description="Why the model is not ready; null when it is."
    )
    detail: str | None = Field(
        default=None,
        description="What to do, as a sentence; null when ready.",
        examples=[
            "calls to this model will fail: the environment variable OPENAI_API_KEY named by "
            "api_key_env is not set in the service's environment; export it where ctxsvc runs "
            "and restart, or remove api_key_env if the server needs no key"
        ],
    )


class ModelOut(BaseModel):
    id: str
    context_window_tokens: int
    max_output_tokens: int
    max_reasoning_tokens: int | None
    accepts_data_blocks: bool
    fixed_reserve_tokens: int
    safety_margin_tokens: int
    token_counter: str
    effective_input_tokens: int
    auto_compact_token_limit: int
    provider: dict[str, Any]
    builtin: bool
    readiness: ModelReadinessOut = Field(
        description="Whether this replica can call the model now (its key variable is set, "
        "or it needs none)."
    )
    calibration: dict[str, Any] | None = None
