"""A prompt prefix cache that behaves the way Anthropic documents its prompt caching.

Sources (Anthropic "Prompt caching" guide, consulted 2026-12-02 through the project's
documentation search): the prompt is read in the order ``tools`` → ``system`` → ``messages``; a
content block carrying ``cache_control`` is a cache breakpoint; the prefix through a breakpoint
is written to the cache when it is at least the model's minimum cacheable length (1024 tokens
for the Sonnet and Opus models); a request reads the longest previously written prefix that
ends at one of its breakpoints, and the system also checks the block boundaries up to 20 blocks
before each breakpoint for an earlier written one; usage reports ``cache_read_input_tokens``
(the prefix read), ``cache_creation_input_tokens`` (from there through the last breakpoint,
written now) and ``input_tokens`` (the rest, after the last breakpoint).

The model here:

- *Blocks*: each tool definition is one block; ``system`` (a string is one text block) and each
  message's content blocks (string content is one text block) follow in order. A block's
  identity is its JSON without ``cache_control`` (keys sorted, compact separators) together with
  its message's role and whether it starts that message, so merging two messages into one is a
  change, as it is for the provider.
- *Tokens*: ⌈UTF-8 bytes of that identity JSON ÷ 4⌉ per block — deterministic, close to a real
  tokenizer's figure for English text and code, and independent of the service's own counter
  (the benchmark compares the two).
- *Prefixes*: a written prefix is the SHA-256 chain of its blocks' identities; a request's
  breakpoint ``b`` reads the longest written prefix among the boundaries ``b, b−1, … b−20``
  (the lookback); writes happen at every breakpoint whose prefix is at least
  ``min_cacheable_tokens`` long.
- Not modelled: the 5-minute lifetime (a benchmark session is far shorter), a separate cache per
  model (one fake serves one model), and the 4-breakpoint limit (counted, not enforced:
  ``CacheUsage.breakpoints`` shows what a request asked for).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

__all__ = [
    "LOOKBACK_BLOCKS",
    "MIN_CACHEABLE_TOKENS",
    "CacheUsage",
    "PrefixCache",
    "PromptBlock",
    "block_tokens",
    "prompt_blocks",
]

LOOKBACK_BLOCKS = 20
MIN_CACHEABLE_TOKENS = 1024


@dataclass(frozen=True, slots=True)
class PromptBlock:
    """One block of the prompt in reading order. ``message`` is the index into ``messages``
    (``-2`` for the tools, ``-1`` for the system prompt)."""

    message: int
    identity: bytes
    tokens: int
    marked: bool


@dataclass(frozen=True, slots=True)
class CacheUsage:
    """What one request read, wrote and sent uncached (the provider's ``usage`` figures)."""

    input_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int
    read_blocks: int  # blocks of the prefix read from the cache
    breakpoints: int  # blocks that carried ``cache_control``
    # Cumulative tokens at the end of each message (tools, system, then each of ``messages``):
    # the benchmark places a token figure between message boundaries with it.
    message_ends: tuple[int, ...]

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


def block_tokens(identity: bytes) -> int:
    """The documented token rule: ⌈UTF-8 bytes ÷ 4⌉, at least 1."""
    return max(1, math.ceil(len(identity) / 4))


def _block(message: int, role: str, first: bool, block: Any) -> PromptBlock:
    marked = isinstance(block, dict) and "cache_control" in block
    identity = json.dumps(
        {"role": role, "starts_message": first, "block": _without_cache_control(block)},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()
    return PromptBlock(message, identity, block_tokens(identity), marked)


def _content(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content or [])


def prompt_blocks(body: dict[str, Any]) -> list[PromptBlock]:
    """The blocks of a Messages request body in the order the provider reads them."""
    blocks = [_block(-2, "tools", i == 0, tool) for i, tool in enumerate(body.get("tools") or [])]
    system = _content(body.get("system"))
    blocks += [_block(-1, "system", i == 0, b) for i, b in enumerate(system)]
    for index, message in enumerate(body.get("messages") or []):
        content = _content(message.get("content"))
        role = str(message.get("role"))
        blocks += [_block(index, role, i == 0, b) for i, b in enumerate(content)]
    return blocks


class PrefixCache:
    """The written prefixes of one model's cache; ``observe`` serves one request."""

    def __init__(
        self, *, min_cacheable_tokens: int = MIN_CACHEABLE_TOKENS, lookback: int = LOOKBACK_BLOCKS
    ) -> None:
        self.min_cacheable_tokens = min_cacheable_tokens
        self.lookback = lookback
        self._written: set[bytes] = set()

    @property
    def written(self) -> int:
        """How many distinct prefixes were written so far."""
        return len(self._written)

    def observe(self, body: dict[str, Any]) -> CacheUsage:
        """Read what the request's breakpoints find, write its breakpoints, report usage."""
        blocks = prompt_blocks(body)
        digests: list[bytes] = []
        cumulative: list[int] = []
        chain = hashlib.sha256()
        total = 0
        for block in blocks:
            chain.update(len(block.identity).to_bytes(8, "big"))
            chain.update(block.identity)
            digests.append(chain.copy().digest())
            total += block.tokens
            cumulative.append(total)
        breakpoints = [i for i, block in enumerate(blocks) if block.marked]

        read = 0  # blocks read
        for point in breakpoints:
            for boundary in range(point, max(-1, point - self.lookback - 1), -1):
                if digests[boundary] in self._written:
                    read = max(read, boundary + 1)
                    break
        cacheable = [p for p in breakpoints if cumulative[p] >= self.min_cacheable_tokens]
        for point in cacheable:
            self._written.add(digests[point])

        read_tokens = cumulative[read - 1] if read else 0
        written_through = cacheable[-1] + 1 if cacheable else 0
        creation = cumulative[written_through - 1] - read_tokens if written_through > read else 0
        return CacheUsage(
            input_tokens=total - read_tokens - creation,
            cache_read_input_tokens=read_tokens,
            cache_creation_input_tokens=creation,
            read_blocks=read,
            breakpoints=len(breakpoints),
            message_ends=_message_ends(blocks, cumulative),
        )


def _message_ends(blocks: list[PromptBlock], cumulative: list[int]) -> tuple[int, ...]:
    ends: list[int] = []
    for i, block in enumerate(blocks):
        if i + 1 == len(blocks) or blocks[i + 1].message != block.message:
            ends.append(cumulative[i])
    return tuple(ends)
