"""Text rules of the ``local`` summarizer: what a user's words are worth keeping, how a long
message is shortened around its key sentences, how repeats are recognized, and how extracted
text is made safe to place in a summary. Pure and deterministic.
"""

from __future__ import annotations

import re

from app.core.compaction._local_view import IDENTIFIERS

__all__ = [
    "is_constraint",
    "is_salient_request",
    "neutralize",
    "repeat_key",
    "shorten",
]

# Words of a constraint: what the user forbids, requires or limits (English, and a few Chinese
# forms, as the original design pages are Chinese). A constraint is never dropped while the
# summary fits its cap.
_CONSTRAINT = re.compile(
    r"""
    \b(?:never|don'?t|do\ not|does\ not|must|mustn'?t|shouldn'?t|should\ not|shall\ not|only
      |read[-\ ]only|without|avoid|always|ensure|make\ sure|required?|forbidden|prohibited
      |not\ allowed|under\ no\ circumstances|unless|at\ most|at\ least|keep|stay|no\ (?:writes?
      |changes?|edits?|restarts?|deploys?|deletes?|access|network))\b
    | 不要 | 禁止 | 只读 | 必须 | 不能 | 不得 | 仅
    """,
    re.IGNORECASE | re.VERBOSE,
)
# A path (``src/a.py``, ``/etc/x``, ``docs\\x.md``) or a file name with an extension.
_PATH = re.compile(
    r"(?:[\w.-]+[/\\])+[\w.-]+|\b[\w-]+\.(?:py|ts|js|go|rs|java|sql|md|ya?ml|json)\b"
)
_ERRORISH = re.compile(
    r"\b(?:error|errors|exception|traceback|fail(?:s|ed|ing|ure)?|panic|crash(?:ed|es)?)\b"
    r"|\b[A-Z]\w*(?:Error|Exception)\b",
    re.IGNORECASE,
)
# Sentence ends: ``.``, ``!``, ``?`` (and their CJK forms) followed by space, or a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n+")

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
    return _CONSTRAINT.search(text) is not None


def is_salient_request(text: str) -> bool:
    """A request worth more than filler: it names an identifier, a path or an error."""
    return bool(IDENTIFIERS.search(text) or _PATH.search(text) or _ERRORISH.search(text))


def repeat_key(text: str) -> str:
    """What two messages share when one repeats the other ("Any news?" / "any news"):
    case, punctuation and spacing ignored."""
    return _NOT_WORD.sub(" ", text.casefold()).strip()


def shorten(text: str, limit: int) -> str:
    """``text`` (whitespace-trimmed) in at most about ``limit`` characters.

    A longer text keeps its key sentences — constraints, then sentences naming an identifier,
    a path or an error — in their original order, each verbatim, with `` … `` where sentences
    were left out; without any, its first sentences. A single sentence that is still too long
    keeps its start, cut at ``limit``.
    """
    text = text.strip()
    if len(text) <= limit:
        return text
    sentences = [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]
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
        size = len(sentences[index]) + 3
        if chosen and used + size > limit:
            continue
        chosen.add(index)
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


def _sentence_rank(sentence: str) -> int:
    if is_constraint(sentence):
        return 0
    if is_salient_request(sentence):
        return 1
    return 2
