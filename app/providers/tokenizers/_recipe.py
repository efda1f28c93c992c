"""OpenAI's published recipe for the tokens a chat request costs beyond its texts.

Source: the OpenAI Cookbook notebook "How to count tokens with tiktoken"
(``examples/How_to_count_tokens_with_tiktoken.ipynb``, sections 6 and 7), whose printed outputs
match the API's reported ``prompt_tokens`` for gpt-4 / gpt-3.5-turbo (cl100k_base) and gpt-4o /
gpt-4o-mini (o200k_base):

- **Messages** (§6, ``num_tokens_from_messages``): every message costs 3 tokens
  (``<|start|>{role}\\n{content}<|end|>\\n``) plus the tokens of each of its values (role,
  content, and name if present, with 1 more token for a name); every reply is primed with
  ``<|start|>assistant<|message|>``: 3 tokens once per request.
- **Tool definitions** (§7, ``num_tokens_for_tools``, a community-derived reverse engineering
  that the cookbook checks against the API): per function ``func_init`` tokens plus the tokens
  of ``"{name}:{description}"`` (one trailing full stop dropped); when it has properties,
  ``prop_init`` once plus per property ``prop_key`` and the tokens of
  ``"{key}:{type}:{description}"`` (one trailing full stop dropped) and, for an ``enum``,
  ``enum_init`` once and ``enum_item`` + the item's tokens per item; ``func_end`` once for the
  whole array. ``func_init`` is 7 for the gpt-4o family (o200k_base) and 10 for gpt-4 /
  gpt-3.5-turbo (cl100k_base); the other constants are shared. The recipe ignores nested
  schemas, ``required`` and ``items``: deeply nested schemas are under-counted by it, and so by us.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from app.core.content import compact_json

__all__ = [
    "DATA_BLOCK_TOKENS",
    "REPLY_PRIMING_TOKENS",
    "TOKENS_PER_MESSAGE",
    "TOKENS_PER_NAME",
    "tool_definitions_tokens",
]

TOKENS_PER_MESSAGE: Final = 3
TOKENS_PER_NAME: Final = 1
REPLY_PRIMING_TOKENS: Final = 3

# A data block (image or file) has no text to tokenize and we never know its pixel size here.
# OpenAI's vision pricing rule is 85 base tokens + 170 per 512-px tile at high detail; its own
# worked example, a 1024×1024 image, costs 85 + 4 × 170 = 765. We charge that figure per data
# block, whatever its media type: a documented fixed cost, not a measurement.
DATA_BLOCK_TOKENS: Final = 765

_PROP_INIT: Final = 3
_PROP_KEY: Final = 3
_ENUM_INIT: Final = -3
_ENUM_ITEM: Final = 3
_FUNC_END: Final = 12


def _text(value: Any) -> str:
    # The recipe concatenates strings; anything else (a list of types, a number) is written as
    # compact JSON so the figure stays deterministic instead of failing.
    if value is None:
        return ""
    return value if isinstance(value, str) else compact_json(value)


def _drop_full_stop(text: str) -> str:
    return text[:-1] if text.endswith(".") else text


def _function_parts(tool: Any) -> tuple[str, str, Mapping[str, Any]]:
    """Name, description and properties of one definition.

    Accepts the service's ``{name, description, input_schema}`` (spec §2) and OpenAI's
    ``{"type": "function", "function": {name, description, parameters}}``.
    """
    if not isinstance(tool, Mapping):
        return "", "", {}
    function = tool.get("function")
    body: Mapping[str, Any] = function if isinstance(function, Mapping) else tool
    schema = body.get("input_schema", body.get("parameters"))
    properties = schema.get("properties") if isinstance(schema, Mapping) else None
    return (
        _text(body.get("name")),
        _text(body.get("description")),
        properties if isinstance(properties, Mapping) else {},
    )


def tool_definitions_tokens(
    tools: Sequence[Any], count: Callable[[str], int], *, func_init: int
) -> int:
    """Tokens of a whole tool-definition array per the cookbook recipe (0 when empty)."""
    if not tools:
        return 0
    total = _FUNC_END
    for tool in tools:
        name, description, properties = _function_parts(tool)
        total += func_init + count(f"{name}:{_drop_full_stop(description)}")
        if not properties:
            continue
        total += _PROP_INIT
        for key, prop in properties.items():
            prop_map: Mapping[str, Any] = prop if isinstance(prop, Mapping) else {}
            total += _PROP_KEY
            enum = prop_map.get("enum")
            if isinstance(enum, Sequence) and not isinstance(enum, str):
                total += _ENUM_INIT
                total += sum(_ENUM_ITEM + count(_text(item)) for item in enum)
            p_type = _text(prop_map.get("type"))
            p_desc = _drop_full_stop(_text(prop_map.get("description")))
            total += count(f"{key}:{p_type}:{p_desc}")
    return total
