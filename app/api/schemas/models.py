"""Model capabilities as the API carries them (API.md ``model``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.core.capabilities import ModelCapabilities

__all__ = ["CapabilitiesIn", "TokenCounterName"]

TokenCounterName = Literal["estimate", "tiktoken:o200k_base", "tiktoken:cl100k_base"]


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
        caps = ModelCapabilities(**self.model_dump())
        caps.limits()  # refuse reserves that consume the window before anything else happens
        return caps
