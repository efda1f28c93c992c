"""Model capabilities and the limits derived from them (SPEC §3.2, §3.3).

Limits are per model, never a global constant. Capabilities whose reserves consume the whole
window are refused here, so no request can ever be built with them ("fail before the model call").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from app.core.errors import InvalidInput

__all__ = [
    "AGENT_MESSAGE_CAP",
    "AUTO_COMPACT_PERCENT",
    "MAX_TOOL_RESULT_TOKENS",
    "PROMPT_CACHING_MODES",
    "SKILL_BODY_CAP",
    "SUMMARY_MAX_OUTPUT_TOKENS",
    "SYSTEM_PART_CAP",
    "ModelCapabilities",
    "ModelLimits",
    "PromptCaching",
]

AUTO_COMPACT_PERCENT = 85
SYSTEM_PART_CAP = 10_000
SKILL_BODY_CAP = 8_000
AGENT_MESSAGE_CAP = 4_000
MAX_TOOL_RESULT_TOKENS = 8_000
SUMMARY_MAX_OUTPUT_TOKENS = 16_384

# Whether requests to the model carry cache breakpoints (``app.core.caching``): ``auto`` places
# them by the documented rule, ``off`` sends today's bytes. The offline kinds ignore it.
PromptCaching: TypeAlias = Literal["off", "auto"]
PROMPT_CACHING_MODES: Final[tuple[PromptCaching, ...]] = ("off", "auto")


@dataclass(frozen=True, slots=True)
class ModelCapabilities:
    context_window_tokens: int
    max_output_tokens: int
    max_reasoning_tokens: int | None = None
    accepts_data_blocks: bool = True
    fixed_reserve_tokens: int = 0
    safety_margin_tokens: int = 0
    token_counter: str = "estimate"
    prompt_caching: PromptCaching = "auto"

    def limits(self) -> ModelLimits:
        """Validate and derive the limits; raises ``InvalidInput`` (``invalid_capabilities``)."""
        return ModelLimits.from_capabilities(self)


@dataclass(frozen=True, slots=True)
class ModelLimits:
    context_window_tokens: int
    max_output_tokens: int
    effective_input_tokens: int
    auto_compact_token_limit: int

    @property
    def trigger_line(self) -> int:
        return min(self.auto_compact_token_limit, self.effective_input_tokens)

    def reaches_auto_compact_limit(self, estimated_input: int, reserved_output: int) -> bool:
        """Equality triggers (SPEC §3.2)."""
        return estimated_input + reserved_output >= self.trigger_line

    @classmethod
    def from_capabilities(cls, caps: ModelCapabilities) -> ModelLimits:
        for field in (
            "context_window_tokens",
            "max_output_tokens",
            "max_reasoning_tokens",
            "fixed_reserve_tokens",
            "safety_margin_tokens",
        ):
            value = getattr(caps, field)
            if value is not None and value < 0:
                raise InvalidInput(
                    "invalid_capabilities",
                    f"{field} is {value}; token figures must be zero or positive",
                )
        if caps.context_window_tokens <= 0 or caps.max_output_tokens <= 0:
            raise InvalidInput(
                "invalid_capabilities",
                "context_window_tokens and max_output_tokens must both be positive",
            )
        reserved = (
            caps.max_output_tokens
            + (caps.max_reasoning_tokens or 0)
            + caps.fixed_reserve_tokens
            + caps.safety_margin_tokens
        )
        effective = caps.context_window_tokens - reserved
        if effective <= 0:
            raise InvalidInput(
                "invalid_capabilities",
                f"the reserves (output {caps.max_output_tokens}, reasoning "
                f"{caps.max_reasoning_tokens or 0}, fixed {caps.fixed_reserve_tokens}, safety "
                f"{caps.safety_margin_tokens} = {reserved}) leave no input room in a "
                f"{caps.context_window_tokens}-token window; lower a reserve or use a larger "
                "window",
            )
        return cls(
            context_window_tokens=caps.context_window_tokens,
            max_output_tokens=caps.max_output_tokens,
            effective_input_tokens=effective,
            auto_compact_token_limit=-(-effective * AUTO_COMPACT_PERCENT // 100),
        )
