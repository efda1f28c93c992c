"""Text rules of the ``local`` summarizer: what a user's words are worth keeping, how a long
message is shortened around its key sentences, how repeats are recognized, and how extracted
text is made safe to place in a summary. Pure and deterministic.
"""

from __future__ import annotations

import re

from app.core.compaction._local_view import IDENTIFIERS
from app.core.facts import Strength, binding, split_sentences, strength

__all__ = [
    "is_constraint",
    "is_salient_request",
    "neutralize",
    "repeat_key",
    "shorten",
]

# A path (``src/a.py``, ``/etc/x``, ``docs\\x.md``) or a file name with an extension.
_PATH = re.compile(
    r"(?:[\w.-]+[/\\])+[\w.-]+|\b[\w-]+\.(?:py|ts|js|go|rs|java|sql|md|ya?ml|json)\b"
)
_ERRORISH = re.compile(
    r"\b(?:error|errors|exception|traceback|fail(?:s|ed|ing|ure)?|panic|crash(?:ed|es)?)\b"
    r"|\b[A-Z]\w*(?:Error|Exception)\b",
    re.IGNORECASE,
)
# A red-line sentence that points back ("let's not do *that*") keeps the sentences it points
# to: "Last time someone trusted the header. It blew up in production. So, let's not do that."
_POINTS_BACK = re.compile(r"\b(?:that|this|it|so|again)\b|那样|这样|那个|这个|上次", re.IGNORECASE)
_POINTED_TO = 2

# ``<`` that opens (or closes) a control tag becomes U+2039, so the text stays readable but no
# longer matches the case-insensitive check of §7.4.
_CONTROL_TAG = re.compile(
    r"<(?=/?(?:conversation_summary|system|developer|instructions|tool|assistant|user_query))",
    re.IGNORECASE | re.ASCII,
)
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_NOT_WORD = re.compile(r"[\W_]+")


def neutralize(text: str) -> str:
    return _CONTROL_CHARS.sub("\ufffd", _CONTROL_TAG.sub("\u2039", text))


def is_constraint(text: str) -> bool:
    """Words that forbid or require: a red line or a rule (``app.core.facts.instructions``);
    a bare revocation ("scratch that") is a decision, not a constraint to pin."""
    return binding(text) is not Strength.NONE


def is_salient_request(text: str) -> bool:
    """A request worth more than filler: it names an identifier, a path or an error."""
    return bool(IDENTIFIERS.search(text) or _PATH.search(text) or _ERRORISH.search(text))


def repeat_key(text: str) -> str:
    """What two messages share when one repeats the other ("Any news?" / "any news"):
    case, punctuation and spacing ignored."""
    return _NOT_WORD.sub(" ", text.casefold()).strip()


def shorten(text: str, limit: int) -> str:
    """``text`` (whitespace-trimmed) in at most about ``limit`` characters.

    A longer text keeps its key sentences — red lines (with the sentences a red line points
    back to: "It blew up. So let's not do that."), then rules, then sentences naming an
    identifier, a path or an error — in their original order, each verbatim, with `` … ``
    where sentences were left out; without any, its first sentences. A single sentence that is
    still too long keeps its start, cut at ``limit``. Sentences end at CJK punctuation too.
    """
    text = text.strip()
    if len(text) <= limit:
        return text
    sentences = split_sentences(text)
    ranked = sorted(
        range(len(sentences)),
        key=lambda i: (_sentence_rank(sentences[i]), i),
    )
    chosen: set[int] = set()
    seen: set[str] = set()
    used = 0
    for index in ranked:
        if sentences[index] in seen:
            continue  # a sentence said twice is kept once
        seen.add(sentences[index])
        unit = [i for i in _unit(sentences, index) if i not in chosen]
        size = sum(len(sentences[i]) + 3 for i in unit)
        if used + size > limit and len(unit) > 1:
            unit, size = [index], len(sentences[index]) + 3  # the sentence without its example
        if chosen and used + size > limit:
            continue
        chosen.update(unit)
        used += size
    parts: list[str] = []
    previous = -1
    for index in sorted(chosen):
        if index != previous + 1:
            parts.append("…")
        parts.append(sentences[index])
        previous = index
    if previous != len(sentences) - 1:
        parts.append("…")
    shortened = " ".join(parts)
    if len(shortened) > limit + 2:
        cut = shortened[:limit].rstrip()
        shortened = f"{cut} … [{len(text) - len(cut)} more characters]"
    return shortened


def _unit(sentences: list[str], index: int) -> list[int]:
    """The sentence at ``index`` with those it points back to (a red line's example)."""
    sentence = sentences[index]
    if strength(sentence) is Strength.RED_LINE and _POINTS_BACK.search(sentence):
        return list(range(max(0, index - _POINTED_TO), index + 1))
    return [index]


def _sentence_rank(sentence: str) -> int:
    binds = strength(sentence)
    if binds is not Strength.NONE:
        return int(binds)  # a red line 0, a rule 1
    return 2 if is_salient_request(sentence) else 3
