"""The process's memo of salient lines (``app.core.pipeline.salient.SalientLineMemo``).

Every prepare cuts each pruned or oversized tool result again when its walk is not carried on
from an earlier call (a session's first prepare in this process, a moved pruning watermark, a
stateless request posted again), and finding the lines costs far more than looking the text up:
the core keeps no state, so the service owns the memo and hands it to every ``prepare`` it runs.
Bounded by ``SalientLineMemo.MAX_CHARS`` characters of text (8 M) and ``MAX_ENTRIES`` texts.
It carries the one-pass keyword search (``salient_finder.py``) that looks at a text it does not
hold, so every prepare the service runs finds lines the fast way without another argument.
"""

from __future__ import annotations

from app.core.pipeline.salient import SalientLineMemo
from app.services.salient_finder import AhoCorasickFinder

__all__ = ["SALIENT_LINES"]

SALIENT_LINES = SalientLineMemo(AhoCorasickFinder())
