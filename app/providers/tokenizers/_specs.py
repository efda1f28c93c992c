"""Published facts about the two tiktoken encodings we count with.

Everything here is copied from OpenAI's own sources so a reviewer can check it line by line:
the SHA-256 digests, split patterns and special tokens come from tiktoken's
``tiktoken_ext/openai_public.py`` (tiktoken 0.14); keeping them here (rather than importing that
module's constructors) is what guarantees tiktoken never fetches its blob URLs.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

__all__ = ["CL100K_BASE", "ENCODINGS", "O200K_BASE", "EncodingSpec"]

_ENDOFTEXT = "<|endoftext|>"
_FIM_PREFIX = "<|fim_prefix|>"
_FIM_MIDDLE = "<|fim_middle|>"
_FIM_SUFFIX = "<|fim_suffix|>"
_ENDOFPROMPT = "<|endofprompt|>"


@dataclass(frozen=True, slots=True)
class EncodingSpec:
    """One encoding: what its data file must hash to and how tiktoken must be configured."""

    name: str
    sha256: str
    pat_str: str
    special_tokens: MappingProxyType[str, int]
    # Tool-definition recipe constant that differs by model family (see ``_recipe``).
    tool_func_init: int

    @property
    def file_name(self) -> str:
        """Name of the data file, as tiktoken's cache and the baked directory use it."""
        return f"{self.name}.tiktoken"


CL100K_BASE: Final = EncodingSpec(
    name="cl100k_base",
    sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    pat_str=(
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+"""
        r"""| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
    ),
    special_tokens=MappingProxyType(
        {
            _ENDOFTEXT: 100257,
            _FIM_PREFIX: 100258,
            _FIM_MIDDLE: 100259,
            _FIM_SUFFIX: 100260,
            _ENDOFPROMPT: 100276,
        }
    ),
    tool_func_init=10,  # gpt-3.5-turbo / gpt-4 in the cookbook
)

O200K_BASE: Final = EncodingSpec(
    name="o200k_base",
    sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    pat_str="|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    ),
    special_tokens=MappingProxyType({_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018}),
    tool_func_init=7,  # gpt-4o / gpt-4o-mini in the cookbook
)

ENCODINGS: Final[MappingProxyType[str, EncodingSpec]] = MappingProxyType(
    {spec.name: spec for spec in (O200K_BASE, CL100K_BASE)}
)
