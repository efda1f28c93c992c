"""Sentences of a text, Latin and CJK alike.

A Latin sentence ends at ``.``, ``!`` or ``?`` followed by whitespace; a CJK one at ``。``,
``！``, ``？`` or ``；`` whether or not whitespace follows (Chinese puts none), so a paragraph
written without spaces is still cut between sentences, never in the middle of one.
"""

from __future__ import annotations

import re

__all__ = ["split_sentences"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])\s*|\n+")


def split_sentences(text: str) -> list[str]:
    """The non-empty sentences of ``text``, stripped, in order."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]
