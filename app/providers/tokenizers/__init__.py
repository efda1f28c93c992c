"""Token counters by name: ``estimate`` and exact, offline tiktoken encodings (spec §3.4).

``get_counter(name, data_dir=...)`` returns a ``TokenCounter`` (``app.core.counting``):

- ``estimate`` — the default bytes/4 counter of the core, measuring with orjson
  (``app.fastjson.ESTIMATE``: the same figures as the core's ``ESTIMATE``);
- ``tiktoken:o200k_base`` and ``tiktoken:cl100k_base`` — exact counters (``TiktokenCounter``)
  built from encoding files verified against their published SHA-256, never downloaded. The
  optional ``data_dir`` (the caller reads the ``CTXSVC_TOKENIZER_DIR`` setting; this package never
  reads the environment) may hold such files; otherwise the copies shipped in ``data/`` are used
  (OpenAI's published files, MIT-licensed: ``data/LICENSE``). The first call for an encoding
  builds it (about half a second); later calls reuse it.

Errors (``app.core.errors``)::

    InvalidInput("unknown_token_counter")   a name not in COUNTER_NAMES
    Unavailable("tokenizer_data_invalid")   the encoding file found does not verify
    Unavailable("tokenizer_data_missing")   neither the data directory nor the package holds it
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from app.core.content import text_block
from app.core.counting import EstimateCounter, TokenCounter, estimate_tokens, utf8_len
from app.core.errors import InvalidInput
from app.fastjson import ESTIMATE
from app.providers.tokenizers._counter import TiktokenCounter
from app.providers.tokenizers._loader import (
    DATA_INVALID,
    DATA_MISSING,
    clear_cache,
    encoding_file_bytes,
    encoding_spec,
    load_encoding,
)

__all__ = [
    "COUNTER_NAMES",
    "DATA_INVALID",
    "DATA_MISSING",
    "TiktokenCounter",
    "clear_cache",
    "count_text",
    "encoding_file_bytes",
    "get_counter",
]

_TIKTOKEN_PREFIX = "tiktoken:"

COUNTER_NAMES: Final = ("estimate", "tiktoken:o200k_base", "tiktoken:cl100k_base")


def get_counter(name: str, *, data_dir: Path | None = None) -> TokenCounter:
    """The counter called ``name`` (one of ``COUNTER_NAMES``); loads its encoding on first use."""
    if name == ESTIMATE.name:
        return ESTIMATE
    if name not in COUNTER_NAMES:
        raise InvalidInput(
            "unknown_token_counter",
            f"unknown token counter {name!r}; choose one of: {', '.join(COUNTER_NAMES)}",
            counter=name,
        )
    encoding_name = name.removeprefix(_TIKTOKEN_PREFIX)
    return TiktokenCounter(encoding_spec(encoding_name), load_encoding(encoding_name, data_dir))


def count_text(counter: TokenCounter | str, text: str) -> int:
    """Tokens of raw ``text`` with no message framing.

    Exact for a tiktoken counter; ``ceil(utf8 bytes / 4)`` for the estimate. Any other counter
    is asked for the tokens of a one-text-block content (its own rule, JSON framing included).
    """
    resolved = get_counter(counter) if isinstance(counter, str) else counter
    if isinstance(resolved, TiktokenCounter):
        return resolved.count_text(text)
    if isinstance(resolved, EstimateCounter):
        return estimate_tokens(utf8_len(text))
    return resolved.tokens(resolved.measure_content([text_block(text)]))
