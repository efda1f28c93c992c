"""``ModelOut`` from a model entry, its readiness and its calibration."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from app.core.errors import InvalidInput
from app.services.calibration import Calibration
from app.services.model_types import ModelEntry, ModelReadiness

__all__ = ["model_json"]


def model_json(
    entry: ModelEntry, readiness: ModelReadiness, calibration: Calibration | None = None
) -> dict[str, Any]:
    caps = entry.capabilities
    try:
        limits = caps.limits()
        reserved = limits.output_reserve_tokens
        effective, auto_compact = limits.effective_input_tokens, limits.auto_compact_token_limit
    except InvalidInput:
        # A row stored under other rules (or edited by hand) still reads: no input room, and
        # ``readiness`` says why (``ModelClients.readiness``).
        reserved = effective = auto_compact = 0
    provider: dict[str, Any] = {
        "kind": entry.provider.kind,
        "base_url": entry.provider.base_url,
        "model_name": entry.provider.model_name,
        "api_key_env": entry.provider.api_key_env,
    }
    if entry.provider.script is not None:
        provider["script"] = entry.provider.script
        provider["script_position"] = entry.script_position
    return {
        "id": entry.id,
        "context_window_tokens": caps.context_window_tokens,
        "max_output_tokens": caps.max_output_tokens,
        "max_reasoning_tokens": caps.max_reasoning_tokens,
        "accepts_data_blocks": caps.accepts_data_blocks,
        "fixed_reserve_tokens": caps.fixed_reserve_tokens,
        "safety_margin_tokens": caps.safety_margin_tokens,
        "output_reserve_tokens": caps.output_reserve_tokens,
        "token_counter": caps.token_counter,
        "prompt_caching": caps.prompt_caching,
        "reasoning": caps.reasoning,
        "reserved_output_tokens": reserved,
        "effective_input_tokens": effective,
        "auto_compact_token_limit": auto_compact,
        "provider": provider,
        "builtin": entry.builtin,
        "readiness": asdict(readiness),
        "calibration": None if calibration is None else calibration.to_json(),
    }
