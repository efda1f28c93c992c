"""What a bring-your-own summary must keep of the checkpoint it replaces (spec §7.8).

The previous checkpoint's summary — written by the service's summarizer or accepted from the
caller earlier, and known as such by its stored origin — holds the user's own words: the
identifiers the user named (its ``Identifiers:`` line, and any named in the user requests it
quotes) and the user's constraints (the quoted requests of sections 1 and 6 with a constraint
word, one sentence each). A new summary posted by the caller replaces it; one that no longer
carries an identifier, or has lost most of a constraint's words (a wrong ticket, a lifted red
line), is refused with ``summary_drops_user_facts`` unless the caller accepts the loss
explicitly.

The check is lexical, not semantic, and errs on the side of asking: an identifier must appear
as a whole token; a constraint is kept when at least half of its content words (or, for text
without spaces such as Chinese, of its character pairs) appear in the new summary. A faithful
paraphrase keeps most of them; "the read-only rule was lifted" keeps few.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from app.core.compaction._local_merge import read_summary
from app.core.compaction._local_text import is_constraint
from app.core.compaction._local_view import IDENTIFIERS
from app.core.errors import InvalidInput

__all__ = ["UserFacts", "dropped_user_facts", "summary_drops_user_facts", "user_facts_of"]

# At most this many constraints are checked (the newest), and listed in an error.
MAX_CONSTRAINTS = 40
MAX_CONSTRAINT_CHARS = 300

# A sentence ends at ``.!?;`` and a space (not inside ``7.1``), at its CJK forms, at a line end.
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])|\n+")
_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?", re.IGNORECASE)
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")
# Words too common to show that a constraint survived.
_STOP = frozenset(
    {
        "the",
        "and",
        "for",
        "this",
        "that",
        "with",
        "are",
        "was",
        "were",
        "you",
        "your",
        "our",
        "its",
        "any",
        "all",
        "from",
        "into",
        "onto",
        "have",
        "has",
        "had",
        "but",
        "not",
        "can",
        "will",
        "would",
        "should",
        "could",
        "here",
        "there",
        "what",
        "when",
        "which",
        "who",
        "how",
        "it's",
        "i'm",
        "we're",
        "they",
        "them",
        "then",
        "than",
        "also",
        "just",
    }
)


@dataclass(frozen=True, slots=True)
class UserFacts:
    """The user's identifiers and constraint sentences a summary must carry on."""

    identifiers: tuple[str, ...]
    constraints: tuple[str, ...]


def _user_texts(summary: str) -> list[str]:
    carried = read_summary(summary)
    texts = [carried.first_request or "", carried.latest_request or ""]
    texts += [text for text, _ in carried.requests]
    return [t for t in texts if t.strip()]


def user_facts_of(previous_summary: str) -> UserFacts:
    """The user facts of the summary a checkpoint installed (its text, root to close)."""
    carried = read_summary(previous_summary)
    texts = _user_texts(previous_summary)
    named = [m.group(0) for text in texts for m in IDENTIFIERS.finditer(text)]
    identifiers = tuple(dict.fromkeys([*carried.identifiers, *named]))
    sentences = [
        sentence.strip()
        for text in texts
        for line in text.splitlines()
        for sentence in _SENTENCE.split(line.removeprefix("> "))
        if sentence.strip() and is_constraint(sentence)
    ]
    constraints = tuple(
        s[:MAX_CONSTRAINT_CHARS] for s in list(dict.fromkeys(sentences))[-MAX_CONSTRAINTS:]
    )
    return UserFacts(identifiers, constraints)


def _has_identifier(summary: str, identifier: str) -> bool:
    pattern = rf"(?<![A-Za-z0-9_-]){re.escape(identifier)}(?![A-Za-z0-9_])"
    return re.search(pattern, summary) is not None


def _marks(text: str) -> set[str]:
    """A text's content words (lower case) and the character pairs of its CJK runs."""
    words = {w.lower() for w in _WORD.findall(text)}
    marks = {w for w in words if len(w) >= 3 and w not in _STOP}
    for run in _CJK.findall(text):
        marks |= {run[i : i + 2] for i in range(len(run) - 1)} or {run}
    return marks


def _kept(constraint: str, summary_marks: set[str]) -> bool:
    marks = _marks(constraint)
    if not marks:
        return True
    return 2 * len(marks & summary_marks) >= len(marks)


def dropped_user_facts(summary: str, facts: UserFacts) -> UserFacts:
    """The facts ``summary`` no longer carries (empty when it keeps them all)."""
    summary_marks = _marks(summary)
    return UserFacts(
        tuple(i for i in facts.identifiers if not _has_identifier(summary, i)),
        tuple(c for c in facts.constraints if not _kept(c, summary_marks)),
    )


def _listed(values: Iterable[str]) -> str:
    return "; ".join(f"“{v}”" for v in values)


def summary_drops_user_facts(dropped: UserFacts, compaction_id: str) -> InvalidInput:
    """The 422 for a posted summary that drops ``dropped`` of checkpoint ``compaction_id``."""
    parts = []
    if dropped.identifiers:
        parts.append(f"the identifiers {', '.join(dropped.identifiers)}")
    if dropped.constraints:
        parts.append(f"the user's constraints {_listed(dropped.constraints)}")
    return InvalidInput(
        "summary_drops_user_facts",
        f"the summary drops what the user said before checkpoint {compaction_id}: "
        f"{' and '.join(parts)}. Keep them in the summary (a wrong identifier or a lifted "
        "constraint is refused too), or send accept_dropped_user_facts: true to install it "
        "anyway",
        previous_compaction_id=compaction_id,
        dropped_identifiers=list(dropped.identifiers),
        dropped_constraints=list(dropped.constraints),
    )
