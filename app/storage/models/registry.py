"""Global tables: registered models and calibration samples (small, replicable: spec §5)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, CheckConstraint, Index, Integer, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column

from app.core.capabilities import PROMPT_CACHING_MODES, ModelCapabilities, PromptCaching
from app.storage.base import Base, JSONValue, utc_now

__all__ = ["CalibrationSample", "RegisteredModel", "prompt_caching_of"]


def prompt_caching_of(stored: str | None) -> PromptCaching:
    """A stored ``prompt_caching`` as a mode: what the API can store, else the default."""
    for mode in PROMPT_CACHING_MODES:
        if stored == mode:
            return mode
    return "auto"


class RegisteredModel(Base):
    """A model registered through ``PUT /v1/models/{id}``: capabilities plus provider settings."""

    __tablename__ = "models"
    __table_args__ = (
        CheckConstraint("length(trim(id)) > 0", name="id_not_blank"),
        CheckConstraint(
            "provider_kind IN "
            "('openai_chat', 'anthropic_messages', 'openai_responses', 'scripted', 'local')",
            name="provider_kind_valid",
        ),
        CheckConstraint("script_position >= 0", name="script_position_not_negative"),
    )

    # The owning tenant (``app.core.tenancy``; ``SHARED_TENANT``: a shared model every tenant
    # sees). Each tenant names its models in its own namespace.
    tenant_id: Mapped[str] = mapped_column(
        Text, primary_key=True, default="default", server_default="default"
    )
    id: Mapped[str] = mapped_column(Text, primary_key=True)
    context_window_tokens: Mapped[int] = mapped_column(Integer)
    max_output_tokens: Mapped[int] = mapped_column(Integer)
    max_reasoning_tokens: Mapped[int | None] = mapped_column(Integer)
    accepts_data_blocks: Mapped[bool] = mapped_column(Boolean)
    fixed_reserve_tokens: Mapped[int] = mapped_column(Integer, default=0)
    safety_margin_tokens: Mapped[int] = mapped_column(Integer, default=0)
    # NULL: the default rule (``app.core.capabilities.default_output_reserve``).
    output_reserve_tokens: Mapped[int | None] = mapped_column(Integer)
    token_counter: Mapped[str] = mapped_column(String(64), default="estimate")
    # ``off`` | ``auto`` (``app.core.caching.breakpoints``); any other stored value is read as
    # ``auto``.
    prompt_caching: Mapped[str] = mapped_column(String(8), default="auto", server_default="auto")
    # Whether the model reasons (``ModelCapabilities.reasoning``).
    reasoning: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    provider_kind: Mapped[str] = mapped_column(String(32))
    provider_base_url: Mapped[str | None] = mapped_column(Text)
    provider_model_name: Mapped[str | None] = mapped_column(Text)
    provider_api_key_env: Mapped[str | None] = mapped_column(Text)
    # The ``scripted`` kind's entries; ``script_position`` is the index of the next entry, taken
    # atomically by ModelRepository.take_script_entry so every replica agrees (spec §14.2).
    script: Mapped[list[Any] | None] = mapped_column(JSONValue)
    script_position: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(default=utc_now, onupdate=utc_now)

    def capabilities(self) -> ModelCapabilities:
        return ModelCapabilities(
            context_window_tokens=self.context_window_tokens,
            max_output_tokens=self.max_output_tokens,
            max_reasoning_tokens=self.max_reasoning_tokens,
            accepts_data_blocks=self.accepts_data_blocks,
            fixed_reserve_tokens=self.fixed_reserve_tokens,
            safety_margin_tokens=self.safety_margin_tokens,
            token_counter=self.token_counter,
            prompt_caching=prompt_caching_of(self.prompt_caching),
            output_reserve_tokens=self.output_reserve_tokens,
            reasoning=self.reasoning,
        )


class CalibrationSample(Base):
    """One provider-reported input token figure next to our own estimate (spec §3.4)."""

    __tablename__ = "calibration_samples"
    __table_args__ = (Index("ix_calibration_samples_model_counter", "model_id", "counter", "id"),)

    # BigInteger on PostgreSQL, INTEGER on SQLite: only INTEGER PRIMARY KEY autoincrements there.
    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    model_id: Mapped[str] = mapped_column(Text)
    counter: Mapped[str] = mapped_column(String(64))
    estimated_input_tokens: Mapped[int] = mapped_column(Integer)
    reported_input_tokens: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utc_now)
