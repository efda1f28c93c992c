"""An exact ``TokenCounter`` over one verified tiktoken encoding.

Text is counted with ``encode_ordinary``: special-token text such as ``<|endoftext|>`` inside a
message is ordinary text to the provider, so it must be counted as such, not raise.

What counts, per block (``measure_content``):

- ``text`` → its text; ``thinking`` → its thinking text;
- ``tool_call`` → its name + its raw JSON arguments;
- ``tool_result`` → its output: texts counted, data blocks at the fixed cost below, plus the
  text the encodings add for the model (a non-success result's state line, ``[no output]`` for
  an empty one: ``app.core.tool_state``); the ``artifacts`` (caller-only), id and name never
  reach the model as text;
- ``data`` → a fixed ``DATA_BLOCK_TOKENS`` (765, OpenAI's 1024×1024 image figure, see ``_recipe``);
- ``provider_opaque`` → 0: an opaque payload echoed to its provider (signatures, encrypted
  reasoning) is not text the model reads, and no provider publishes its cost.

``measure_message`` adds the cookbook's per-message framing (3 tokens + the role's tokens), to
conversation messages and system parts alike (``frame_message``: each system part is one
``system`` message of the request); ``request_overhead_tokens`` is the 3 reply-priming tokens;
``tokens`` is the identity because measures are already tokens. The per-call framing of tool
calls inside an assistant message is not in any published recipe and is not added.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tiktoken

from app.core.content import Block, OutputBlock
from app.core.tool_state import added_text
from app.providers.tokenizers._recipe import (
    DATA_BLOCK_TOKENS,
    REPLY_PRIMING_TOKENS,
    TOKENS_PER_MESSAGE,
    TOKENS_PER_NAME,
    tool_definitions_tokens,
)
from app.providers.tokenizers._specs import EncodingSpec

__all__ = ["TiktokenCounter"]


class TiktokenCounter:
    """Exact counts for ``tiktoken:<encoding>``; immutable, safe to share across threads."""

    __slots__ = ("_encode", "_spec")

    request_overhead_tokens = REPLY_PRIMING_TOKENS

    def __init__(self, spec: EncodingSpec, encoding: tiktoken.Encoding) -> None:
        self._spec = spec
        self._encode = encoding.encode_ordinary

    @property
    def name(self) -> str:
        return f"tiktoken:{self._spec.name}"

    def count_text(self, text: str) -> int:
        """Tokens of raw text, without any framing."""
        return len(self._encode(text)) if text else 0

    def _output_tokens(self, block: OutputBlock) -> int:
        return self.count_text(block["text"]) if block["type"] == "text" else DATA_BLOCK_TOKENS

    def _block_tokens(self, block: Block) -> int:
        if block["type"] == "text":
            return self.count_text(block["text"])
        if block["type"] == "thinking":
            return self.count_text(block["thinking"])
        if block["type"] == "tool_call":
            return self.count_text(block["name"]) + self.count_text(block["input"])
        if block["type"] == "tool_result":
            output = sum(self._output_tokens(out) for out in block["output"])
            return output + self.count_text(added_text(block))
        if block["type"] == "data":
            return DATA_BLOCK_TOKENS
        return 0  # provider_opaque

    def measure_content(self, content: Sequence[Block]) -> int:
        return sum(self._block_tokens(block) for block in content)

    def frame_message(self, role: str, content_measure: int, *, name: str | None = None) -> int:
        """Tokens of one chat message whose content costs ``content_measure`` (cookbook §6)."""
        total = TOKENS_PER_MESSAGE + self.count_text(role) + content_measure
        if name is not None:
            total += TOKENS_PER_NAME + self.count_text(name)
        return total

    def measure_message(self, role: str, content: Sequence[Block]) -> int:
        return self.frame_message(role, self.measure_content(content))

    def measure_tools(self, tools: Sequence[Any]) -> int:
        return tool_definitions_tokens(tools, self.count_text, func_init=self._spec.tool_func_init)

    def tokens(self, total_measure: int) -> int:
        return total_measure
