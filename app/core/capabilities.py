"""Model capabilities and the limits derived from them (spec §3.2, §3.3).

Limits are per model, never a global constant. Capabilities whose reserves consume the whole
window are refused here, so no request can ever be built with them ("fail before the model call").

The output reserve is what each request keeps of the window for the answer, and the output limit
it sends; it is a policy of the harness, not the model's ceiling (Keel). A model may state it
(``output_reserve_tokens``); otherwise it is ``default_output_reserve``: the ceiling itself while
that is modest, at most ``OUTPUT_RESERVE_CEILING`` tokens and ``OUTPUT_RESERVE_WINDOW_PERCENT`` of
the window. The trigger of spec §3.2 subtracts the reserve from the window and then adds it
again, so a reserve near half the window would compact every request, however short.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

from app.core.errors import InvalidInput

__all__ = [
    "AGENT_MESSAGE_CAP",
    "AUTO_COMPACT_PERCENT",
    "MAX_TOOL_RESULT_TOKENS",
    "OUTPUT_RESERVE_CEILING",
    "OUTPUT_RESERVE_WINDOW_PERCENT",
    "PROMPT_CACHING_MODES",
    "SKILL_BODY_CAP",
    "SUMMARY_MAX_OUTPUT_TOKENS",
    "SYSTEM_PART_CAP",
    "ModelCapabilities",
    "ModelLimits",
    "PromptCaching",
    "default_output_reserve",
]

AUTO_COMPACT_PERCENT = 85
SYSTEM_PART_CAP = 10_000
SKILL_BODY_CAP = 8_000
AGENT_MESSAGE_CAP = 4_000
MAX_TOOL_RESULT_TOKENS = 8_000
SUMMARY_MAX_OUTPUT_TOKENS = 16_384
# The default output reserve (``default_output_reserve``). 32 768 keeps the reserve of every
# model whose ceiling is modest (the spec's 32 000 of 200 000, gpt-4.1's 32 768, gpt-4o's
# 16 384); 40 % of the window keeps the spec's 400 of 1000 and bounds the trigger line from
# below: input + reserve ≥ 85 % of (window − reserve) is reached only from 11 % of the window.
OUTPUT_RESERVE_CEILING = 32_768
OUTPUT_RESERVE_WINDOW_PERCENT = 40

# Whether requests to the model carry cache breakpoints (``app.core.caching.breakpoints``):
# ``auto`` places
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
    # ``None``: ``default_output_reserve`` of the window and ceiling.
    output_reserve_tokens: int | None = None
    # The model reasons and hands its reasoning state back between calls: OpenAI Responses
    # requests ask for it encrypted, which OpenAI refuses for a model that does not reason
    # (``max_reasoning_tokens`` is a window reserve, set or not whatever the model is).
    reasoning: bool = False

    @property
    def output_reserve(self) -> int:
        """The output reserve in force: the stated one, else the default rule."""
        if self.output_reserve_tokens is not None:
            return self.output_reserve_tokens
        return default_output_reserve(self.context_window_tokens, self.max_output_tokens)

    def limits(self) -> ModelLimits:
        """Validate and derive the limits; raises ``InvalidInput`` (``invalid_capabilities``)."""
        return ModelLimits.from_capabilities(self)


def default_output_reserve(context_window_tokens: int, max_output_tokens: int) -> int:
    """The output reserve of a model that states none: its ceiling, at most
    ``OUTPUT_RESERVE_CEILING`` and ``OUTPUT_RESERVE_WINDOW_PERCENT`` % of the window (rounded
    down), and at least 1 (a request's output limit is positive)."""
    share = context_window_tokens * OUTPUT_RESERVE_WINDOW_PERCENT // 100
    return max(1, min(max_output_tokens, OUTPUT_RESERVE_CEILING, share))


@dataclass(frozen=True, slots=True)
class ModelLimits:
    context_window_tokens: int
    max_output_tokens: int
    # What a request keeps for the answer and sends as its output limit (spec §3.2).
    output_reserve_tokens: int
    effective_input_tokens: int
    auto_compact_token_limit: int

    @property
    def trigger_line(self) -> int:
        return min(self.auto_compact_token_limit, self.effective_input_tokens)

    def reaches_auto_compact_limit(self, estimated_input: int, reserved_output: int) -> bool:
        """Equality triggers (spec §3.2)."""
        return estimated_input + reserved_output >= self.trigger_line

    @classmethod
    def from_capabilities(cls, caps: ModelCapabilities) -> ModelLimits:
        for field in (
            "context_window_tokens",
            "max_output_tokens",
            "max_reasoning_tokens",
            "fixed_reserve_tokens",
            "safety_margin_tokens",
            "output_reserve_tokens",
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
        output = caps.output_reserve
        if not 0 < output <= caps.max_output_tokens:
            raise InvalidInput(
                "invalid_capabilities",
                f"output_reserve_tokens is {output}; it must be positive and at most "
                f"max_output_tokens ({caps.max_output_tokens}): it is the output limit each "
                "request sends",
            )
        reserved = (
            output
            + (caps.max_reasoning_tokens or 0)
            + caps.fixed_reserve_tokens
            + caps.safety_margin_tokens
        )
        effective = caps.context_window_tokens - reserved
        if effective <= 0:
            raise InvalidInput(
                "invalid_capabilities",
                f"the reserves (output {output}, reasoning "
                f"{caps.max_reasoning_tokens or 0}, fixed {caps.fixed_reserve_tokens}, safety "
                f"{caps.safety_margin_tokens} = {reserved}) leave no input room in a "
                f"{caps.context_window_tokens}-token window; lower a reserve or use a larger "
                "window",
            )
        return cls(
            context_window_tokens=caps.context_window_tokens,
            max_output_tokens=caps.max_output_tokens,
            output_reserve_tokens=output,
            effective_input_tokens=effective,
            auto_compact_token_limit=-(-effective * AUTO_COMPACT_PERCENT // 100),
        )
