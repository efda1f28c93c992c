"""Facts in a session's text that must outlive compaction (spec §9): what a user's words are
worth (a red line, a softer rule, a decision that replaces an earlier instruction), how severe a
log line is, and the latest value of a changing metric.

Pure and deterministic, standard library only. The ``local`` summary model uses these rules to
decide what to keep and in which order (docs/compaction.md, "What the offline summarizer keeps").
"""

from __future__ import annotations

from app.core.facts.instructions import (
    Strength,
    binding,
    replaced_by,
    revokes,
    states_ownership,
    strength,
)
from app.core.facts.metrics import Reading, readings
from app.core.facts.sentences import split_sentences
from app.core.facts.severity import Severity, most_severe, retry_key, severity

__all__ = [
    "Reading",
    "Severity",
    "Strength",
    "binding",
    "most_severe",
    "readings",
    "replaced_by",
    "retry_key",
    "revokes",
    "severity",
    "split_sentences",
    "states_ownership",
    "strength",
]
