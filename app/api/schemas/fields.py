"""Field types the request schemas share, so that what the schema states is what is accepted.

- Numbers and booleans are strict: an integer field takes a JSON integer (or a number without a
  fraction, ``3.0``, which JSON Schema calls an integer too), never a string or a boolean; a
  boolean field takes only ``true`` or ``false``. Pydantic's default would take ``"3"``, ``0``
  and ``false`` for one another.
- Every integer has an upper bound both engines can store (``maximum`` in the schema).
- JSON carried as text, or as a value whose shape the service does not define, is bounded in
  depth and size (``app.core.limits.json_values``); the error names the field.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool
from pydantic_core import PydanticCustomError

from app.core.limits.json_values import (
    MAX_JSON_CHARS,
    MAX_JSON_DEPTH,
    json_text_problem,
    json_value_problem,
)

__all__ = [
    "MAX_EXACT_INT",
    "MAX_INT32",
    "DoomLoopThreshold",
    "Flag",
    "JsonObject",
    "JsonValue",
    "ModelCalls",
    "PositiveSequence",
    "PositiveTokenCount",
    "RequestModel",
    "SequenceNumber",
    "TokenCount",
    "ToolInputText",
    "ToolResultsTimeout",
    "decimal_at_most",
]


class RequestModel(BaseModel):
    """A request part: a misspelled or unknown field is a 422, never silently dropped."""

    model_config = ConfigDict(extra="forbid")


# INTEGER on PostgreSQL (and what SQLite keeps in the same column): a token figure of a model
# is stored in one. Far above any real window (10 M tokens), far below what the store refuses.
MAX_INT32 = 2**31 - 1
# Sequences are BIGINT (2⁶³−1), but a JSON number past 2⁵³ is not kept exactly by every reader
# (a float64: JavaScript, jsonschema-rs, many JSON libraries), so 2⁶³−1 and 2⁶³+191 would read
# as one number. JSON integers that name a sequence stop at 2⁵³−1; in a string (a replay
# selector, ``Last-Event-ID``) a sequence can go up to 2⁶³−1.
MAX_EXACT_INT = 2**53 - 1


def decimal_at_most(limit: int) -> str:
    """A regular expression (unanchored) for the decimal numbers 0..``limit``, leading zeros
    allowed: a bound stated in a pattern, for integers carried in strings."""
    digits = str(limit)
    shorter = f"[0-9]{{1,{len(digits) - 1}}}" if len(digits) > 1 else None
    same_length = [digits]
    for i, digit in enumerate(digits):
        low = 1 if i == 0 and len(digits) > 1 else 0
        if int(digit) > low:
            top = int(digit) - 1
            rest = len(digits) - i - 1
            same_length.append(f"{digits[:i]}[{low}-{top}][0-9]{{{rest}}}")
    choices = ([shorter] if shorter else []) + same_length
    return "0*(?:" + "|".join(choices) + ")"


def _json_integer(value: Any) -> Any:
    # ``bool`` is an ``int`` in Python: refused first, as JSON Schema does.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("int_type", "Input should be an integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise PydanticCustomError(
                "int_from_float", "Input should be an integer, without a fractional part"
            )
        return int(value)
    return value


def _json_number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PydanticCustomError("float_type", "Input should be a number")
    return value


_AS_JSON_INTEGER = BeforeValidator(_json_integer)
_AS_JSON_NUMBER = BeforeValidator(_json_number)
# An integer as JSON Schema defines one: no strings, no booleans. The bounds come before the
# validator in each ``Annotated`` so that the schema states them as ``minimum``/``maximum``.
TokenCount = Annotated[int, Field(ge=0, le=MAX_INT32), _AS_JSON_INTEGER]
PositiveTokenCount = Annotated[int, Field(ge=1, le=MAX_INT32), _AS_JSON_INTEGER]
SequenceNumber = Annotated[int, Field(ge=0, le=MAX_EXACT_INT), _AS_JSON_INTEGER]
PositiveSequence = Annotated[int, Field(ge=1, le=MAX_EXACT_INT), _AS_JSON_INTEGER]
ModelCalls = Annotated[int, Field(ge=1, le=1000), _AS_JSON_INTEGER]
DoomLoopThreshold = Annotated[int, Field(ge=2, le=100), _AS_JSON_INTEGER]

# How long a turn waits for a caller's tool results: a second to 7 days.
ToolResultsTimeout = Annotated[float, Field(ge=1, le=604_800), _AS_JSON_NUMBER]

Flag = StrictBool
"""``true`` or ``false`` only."""


def _tool_input_text(value: Any) -> Any:
    # The commonest mistake: the arguments object itself instead of its JSON text.
    if isinstance(value, dict | list):
        try:  # their own arguments as the text to send, when short and sane
            example = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (RecursionError, ValueError, TypeError):
            example = ""
        if not example or len(example) > 80:
            example = '{"path": "README.md"}'
        raise PydanticCustomError(
            "json_text_type",
            "tool_call.input must be the JSON text of the arguments, a string: send "
            "{example} (json.dumps of the object), not the object itself",
            {"example": json.dumps(example, ensure_ascii=False)},
        )
    return value


def _text(text: str) -> str:
    problem = json_text_problem(text)
    if problem is not None:
        raise ValueError(f"the JSON text {problem}")
    return text


def _value(value: Any) -> Any:
    problem = json_value_problem(value)
    if problem is not None:
        raise ValueError(f"the JSON value {problem}")
    return value


_LIMITS = (
    f"At most {MAX_JSON_DEPTH} levels of nested arrays and objects and "
    f"{MAX_JSON_CHARS} characters of (compact) JSON."
)

JsonText = Annotated[
    str,
    Field(max_length=MAX_JSON_CHARS, description=f"JSON as text. {_LIMITS}"),
    AfterValidator(_text),
]
ToolInputText = Annotated[
    JsonText,
    BeforeValidator(_tool_input_text),
    Field(description="The raw JSON text of the arguments, as the model produced it. " + _LIMITS),
]
JsonValue = Annotated[Any, Field(description=f"Any JSON value. {_LIMITS}"), AfterValidator(_value)]
JsonObject = Annotated[
    dict[str, Any], Field(description=f"A JSON object. {_LIMITS}"), AfterValidator(_value)
]
