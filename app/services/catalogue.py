"""The built-in model catalogue: real window and output limits of current provider models.

Figures as published by the providers, read on 2026-11-30 through stored copies of their pages:
- OpenAI model pages (platform.openai.com/docs/models): gpt-5 / gpt-5-mini 400 000-token window
  with up to 128 000 output tokens; gpt-4.1 1 047 576 / 32 768; gpt-4o 128 000 / 16 384; o3 and
  o4-mini 200 000 / 100 000. Served by the Responses API only (so catalogued with kind
  ``openai_responses``): gpt-5-codex 400 000 / 128 000 and o3-pro 200 000 / 100 000. The models
  that Chat Completions also serves keep kind ``openai_chat``: an id keeps its protocol
  (docs/decisions.md, "OpenAI Responses as a provider protocol").
- gpt-5's input is capped at 272 000 tokens whatever output limit a request sends (OpenAI's
  launch post; the API answers "Input tokens exceed the configured limit of 272,000 tokens"):
  the part of the 128 000 its default output reserve (32 768) does not take is stated as a fixed
  reserve, so ``effective_input_tokens`` is exactly that cap (gpt-5-codex likewise).
- Which models reason (``reasoning``: their Responses requests ask for the reasoning state back,
  which OpenAI refuses for the others): gpt-5, gpt-5-mini, gpt-5-codex, o3, o3-pro and o4-mini;
  gpt-4.1 and gpt-4o do not (docs/decisions.md).
- gpt-5-codex and o3-pro checked on 2026-12-05 against LiteLLM's model table
  (``model_prices_and_context_window.json`` in github.com/BerriAI/litellm, commit 00035b69):
  gpt-5-codex ``max_input_tokens`` 272 000, ``max_output_tokens`` 128 000 (the 400 000 window is
  their sum, as for gpt-5), ``mode: responses``, endpoint ``/v1/responses`` only; o3-pro 200 000 /
  100 000 (its window shared with the output, as o3's), ``mode: responses``, endpoints
  ``/v1/responses`` and ``/v1/batch``. The figures above stand as written.
- Anthropic models overview (platform.claude.com/docs/en/about-claude/models/overview, as quoted
  on 2026-05-09): claude-opus-4-7 1 000 000 / 128 000; claude-sonnet-4-6 1 000 000 / 64 000;
  claude-haiku-4-5 200 000 / 64 000.
A registered model with the same id overrides a catalogue entry; PUT /v1/models/{id} to adjust.
"""

from __future__ import annotations

from app.core.capabilities import ModelCapabilities, default_output_reserve
from app.services.model_types import ModelEntry, ProviderKind, ProviderSpec

__all__ = ["CATALOGUE"]


def _openai(
    model_id: str,
    window: int,
    output: int,
    kind: ProviderKind = "openai_chat",
    *,
    input_cap: int | None = None,
    reasoning: bool = False,
) -> ModelEntry:
    # ``input_cap``: the provider's own bound on input, below window − output reserve.
    fixed = 0 if input_cap is None else window - default_output_reserve(window, output) - input_cap
    return ModelEntry(
        id=model_id,
        capabilities=ModelCapabilities(
            context_window_tokens=window,
            max_output_tokens=output,
            fixed_reserve_tokens=fixed,
            accepts_data_blocks=True,
            token_counter="tiktoken:o200k_base",
            reasoning=reasoning,
        ),
        provider=ProviderSpec(
            kind=kind,
            base_url="https://api.openai.com/v1",
            model_name=model_id,
            api_key_env="OPENAI_API_KEY",
        ),
        builtin=True,
    )


def _anthropic(model_id: str, window: int, output: int) -> ModelEntry:
    return ModelEntry(
        id=model_id,
        capabilities=ModelCapabilities(
            context_window_tokens=window, max_output_tokens=output, accepts_data_blocks=True
        ),
        provider=ProviderSpec(
            kind="anthropic_messages",
            base_url="https://api.anthropic.com",
            model_name=model_id,
            api_key_env="ANTHROPIC_API_KEY",
        ),
        builtin=True,
    )


# The offline default: deterministic, no network (spec §14.2). A modest window so
# the embedded demo reaches the compaction line in a realistic session.
_LOCAL = ModelEntry(
    id="local",
    capabilities=ModelCapabilities(context_window_tokens=32_000, max_output_tokens=4_096),
    provider=ProviderSpec(kind="local", base_url=None, model_name="local", api_key_env=None),
    builtin=True,
)

CATALOGUE: dict[str, ModelEntry] = {
    e.id: e
    for e in (
        _LOCAL,
        _openai("gpt-5", 400_000, 128_000, input_cap=272_000, reasoning=True),
        _openai("gpt-5-mini", 400_000, 128_000, input_cap=272_000, reasoning=True),
        _openai("gpt-4.1", 1_047_576, 32_768),
        _openai("gpt-4o", 128_000, 16_384),
        _openai("o3", 200_000, 100_000, reasoning=True),
        _openai("o4-mini", 200_000, 100_000, reasoning=True),
        _openai(
            "gpt-5-codex", 400_000, 128_000, "openai_responses", input_cap=272_000, reasoning=True
        ),
        _openai("o3-pro", 200_000, 100_000, "openai_responses", reasoning=True),
        _anthropic("claude-opus-4-7", 1_000_000, 128_000),
        _anthropic("claude-sonnet-4-6", 1_000_000, 64_000),
        _anthropic("claude-haiku-4-5", 200_000, 64_000),
    )
}
