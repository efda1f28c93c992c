"""Compaction service (spec §7): prune, summarize, checkpoint, rewind, replay, transcript.

``CompactionService`` implements ``app.services.ports.TurnCompactor`` for the turn runner and
serves the Compaction API; ``conversation_history_result`` is the runner's ``conversation_history``
tool. Module map: ``source`` (read what a compaction starts from), ``summary`` (model attempts),
``persist`` (store, install, reload), ``pruning`` (§7.2), ``reads`` (list, replay, transcript),
``records`` (JSON shapes).
"""

from app.services.compaction.history import conversation_history_result
from app.services.compaction.persist import InstallHook
from app.services.compaction.service import CompactionService

__all__ = ["CompactionService", "InstallHook", "conversation_history_result"]
