"""``POST /v1/tokens/count`` body and response (spec §13.2)."""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.api.schemas.content import BlockIn
from app.api.schemas.fields import RequestModel
from app.api.schemas.models import TokenCounterName
from app.api.schemas.prepare import PrepareBody

__all__ = ["RegionTokensOut", "TokenCountBody", "TokenCountOut"]


def _given(field: str) -> dict[str, Any]:
    # ``enum: [null]`` rather than ``type: null``: ReDoc merges each branch into each option of
    # the property's own schema and warned "Incompatible types in allOf" over the typed ones.
    others = {f: {"enum": [None]} for f in ("text", "content", "prepare") if f != field}
    return {"required": [field], "properties": {field: {"not": {"type": "null"}}, **others}}


# Exactly one of ``text``, ``content`` and ``prepare`` (the others absent or null).
_EXACTLY_ONE: dict[str, Any] = {"oneOf": [_given(f) for f in ("text", "content", "prepare")]}


class TokenCountBody(RequestModel):
    model_config = ConfigDict(json_schema_extra=_EXACTLY_ONE)

    # A plain string, not the capabilities' Literal: an unknown name is answered with the
    # service's own ``unknown_token_counter`` problem, which lists the valid names (the schema
    # lists them too).
    counter: str | None = Field(
        default=None,
        examples=["tiktoken:o200k_base"],
        json_schema_extra={"enum": [*get_args(TokenCounterName), None]},
        description="`estimate`, `tiktoken:o200k_base` or `tiktoken:cl100k_base`. Default: "
        "`estimate`, or for `prepare` the model's own counter.",
    )
    text: str | None = Field(default=None, description="Raw text, counted without framing.")
    content: list[BlockIn] | None = Field(
        default=None, description="A content array, counted as sent (artifacts never count)."
    )
    prepare: PrepareBody | None = Field(
        default=None,
        description="A whole `POST /v1/prepare` body: the budget of the request it builds.",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> TokenCountBody:
        given = [f for f in ("text", "content", "prepare") if getattr(self, f) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of `text`, `content` or `prepare`")
        return self


class RegionTokensOut(BaseModel):
    system_context_tokens: int
    conversation_tokens: int
    tool_surface_tokens: int
    estimated_input_tokens: int


class TokenCountOut(BaseModel):
    counter: str
    tokens: int
    regions: RegionTokensOut | None = Field(
        default=None, description="Per-region figures, for a `prepare` body only."
    )
