"""Model capabilities as the API carries them (spec §14.1)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from app.api.schemas.fields import Flag, JsonValue, PositiveTokenCount, RequestModel, TokenCount
from app.core.capabilities import ModelCapabilities, PromptCaching

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


class CapabilitiesIn(RequestModel):
    """A model's limits (spec §3.2): the reserves (output, reasoning, fixed, safety) must leave
    input room in the window, or the model is refused (`invalid_capabilities`)."""

    context_window_tokens: PositiveTokenCount = Field(examples=[1000])
    max_output_tokens: PositiveTokenCount = Field(examples=[400])
    max_reasoning_tokens: TokenCount | None = None
    accepts_data_blocks: Flag = True
    fixed_reserve_tokens: TokenCount = 0
    safety_margin_tokens: TokenCount = 0
    output_reserve_tokens: PositiveTokenCount | None = Field(
        default=None,
        description="How much of the window each request keeps for the answer, and the output "
        "limit it sends (`max_completion_tokens`, `max_tokens`); at most `max_output_tokens`. "
        "Null: the default rule, the ceiling while it is modest — `min(max_output_tokens, "
        "32768, 40 % of the window)` (docs/models.md). Summary requests send their own "
        "`min(16384, max_output_tokens)`.",
        examples=[None],
    )
    token_counter: TokenCounterName = "estimate"
    prompt_caching: PromptCaching = Field(
        default="auto",
        description="`auto`: requests carry cache breakpoints by the documented rule "
        "(docs/caching.md) — Anthropic `cache_control` on at most 4 blocks, OpenAI a "
        "`prompt_cache_key` per session; `off`: no marker and no key. The budget is the same "
        "either way (markers change no content). No effect on the offline kinds (`scripted`, "
        "`local`), which keep no prompt cache.",
        examples=["auto"],
    )
    reasoning: Flag = Field(
        default=False,
        description="The model reasons (o3, gpt-5 …): OpenAI Responses requests ask for its "
        'reasoning state back encrypted (`include: ["reasoning.encrypted_content"]`), to send '
        "it on the next call. OpenAI refuses that for a model that does not reason (gpt-4o, "
        "gpt-4.1), so it is sent only when this is true. No effect on other protocols.",
        examples=[False],
    )

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


class ScriptToolCallIn(RequestModel):
    name: str = Field(min_length=1, examples=["read_file"])
    id: str | None = Field(default=None, min_length=1, description="Default: generated.")
    input: JsonValue = Field(
        default_factory=dict,
        description="The arguments: an object (sent as its JSON text), or a string sent as the "
        "raw arguments (to exercise arguments that are not JSON).",
        examples=[{"path": "README.md"}],
    )


class ScriptUsageIn(RequestModel):
    input_tokens: TokenCount | None = None
    output_tokens: TokenCount | None = None
    cached_tokens: TokenCount | None = None
    reasoning_tokens: TokenCount | None = None
    cache_creation_tokens: TokenCount | None = None


class ScriptReplyIn(RequestModel):
    """One model answer: text, tool calls, finish reason and reported usage (all optional)."""

    text: str = ""
    tool_calls: list[ScriptToolCallIn] = Field(default_factory=list, max_length=128)
    finish_reason: Literal["stop", "tool_calls", "length", "content_filter", "other"] | None = (
        Field(default=None, description="Default: `tool_calls` when there are calls, else `stop`.")
    )
    usage: ScriptUsageIn | None = None


class ScriptErrorIn(RequestModel):
    """A provider failure instead of an answer."""

    error: Literal["context_overflow", "rate_limited", "server_error", "timeout"]


ScriptEntryIn = Annotated[ScriptReplyIn | ScriptErrorIn, Field(union_mode="left_to_right")]


# Scheme, then a host part without credentials, then a path; no query, fragment or whitespace.
BASE_URL_PATTERN = r"^[Hh][Tt][Tt][Pp][Ss]?://[^/?#@\s]+(/[^?#\s]*)?$"


class _ProviderBase(RequestModel):
    base_url: str | None = Field(default=None, min_length=1, examples=["https://api.openai.com/v1"])
    model_name: str | None = Field(default=None, min_length=1, examples=["gpt-5"])
    api_key_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="The NAME of the environment variable holding the key; keys never travel "
        "in request bodies. Omit it for a server that needs no key (a local Ollama, vLLM or "
        "llama.cpp): no authentication header is sent.",
        examples=["OPENAI_API_KEY"],
    )


class HttpProviderIn(_ProviderBase):
    """A model API over HTTP: OpenAI Chat Completions or Responses (`base_url` with `/v1`), or
    Anthropic Messages (`base_url` without it)."""

    kind: Literal["openai_chat", "anthropic_messages", "openai_responses"]
    base_url: str = Field(
        min_length=1,
        # What a pattern can say; a port out of range, port 0 or a malformed IPv6 literal is
        # refused by the service (``invalid_base_url``: ``app.providers.urls``).
        pattern=BASE_URL_PATTERN,
        description="An absolute `http://` or `https://` URL with a host and no credentials, "
        "query or fragment (the endpoint path is appended to it); a port, when given, in "
        "1–65535 (422 `invalid_base_url` otherwise).",
        examples=["https://api.openai.com/v1"],
    )
    model_name: str = Field(min_length=1, examples=["gpt-5"])


class ScriptedProviderIn(_ProviderBase):
    """Offline: replays `script`, one entry per model call (PUT resets the position)."""

    kind: Literal["scripted"]
    script: list[ScriptEntryIn] = Field(
        max_length=10_000, description="The entries replayed one per model call."
    )


class LocalProviderIn(_ProviderBase):
    """Offline and deterministic: a short reply, or an extractive summary when asked to
    compact."""

    kind: Literal["local"]


ProviderIn = Annotated[
    HttpProviderIn | ScriptedProviderIn | LocalProviderIn, Field(discriminator="kind")
]


class ModelIn(CapabilitiesIn):
    provider: ProviderIn


class ModelReadinessOut(BaseModel):
    status: Literal["ready", "not_ready"]
    code: (
        Literal[
            "api_key_missing", "api_key_invalid", "invalid_capabilities", "unknown_token_counter"
        ]
        | None
    ) = Field(
        default=None,
        description="Why the model is not ready: the key variable is not set "
        "(`api_key_missing`) or holds what no HTTP header can carry, such as a line break "
        "(`api_key_invalid`); a model stored under other rules whose reserves leave no input "
        "room (`invalid_capabilities`; its `effective_input_tokens` and "
        "`auto_compact_token_limit` read 0) or whose token counter this version does not have "
        "(`unknown_token_counter`); null when ready.",
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
    output_reserve_tokens: int | None = Field(
        description="The output reserve as registered; null: the default rule."
    )
    token_counter: str
    prompt_caching: PromptCaching
    reasoning: bool
    reserved_output_tokens: int = Field(
        description="The output reserve in force (the registered one, else the default rule): "
        "what the budget reserves and what each request sends as its output limit."
    )
    effective_input_tokens: int
    auto_compact_token_limit: int
    provider: dict[str, Any]
    builtin: bool
    readiness: ModelReadinessOut = Field(
        description="Whether this replica can call the model now (its key variable is set, "
        "or it needs none)."
    )
    calibration: dict[str, Any] | None = None
