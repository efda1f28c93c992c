"""Storing a proxied call's answer after the caller has it (spec §21.1; docs/decisions.md,
"The drop-in endpoints store the answer after the response").

The caller's SDK resends its whole history on the next call, the answer included, so the answer
is written in a task of its own once the response (or the stream's last event) is sent, and
the caller does not wait for that transaction. What keeps that safe:

- **Order in this process.** The next request of the same conversation waits for the writes
  still pending under its keys (the session it names, or its tenant, model and system prompt)
  before its own transaction begins, so it finds the answer stored, as if it had been written
  before the response. It waits outside any transaction: a write waiting for the SQLite write
  lock held by a request that waits for the write would never finish.
- **Order across processes** (several workers, PostgreSQL). The write is conditional: under
  the session's lock it stores the answer only while the session's last stored end is still
  the request's. A next request that reached another worker first has continued the session
  with the answer as its client echoed it; the late write then stores nothing (no answer
  twice). A next request that looked the session up before the write committed looks again
  under the lock (``matching``), so it continues the session instead of forking it.
- **A lost write** (the process stopped before it committed, or it failed): the next request
  holds the answer in its history and appends it as new, the way an unknown history is stored.
  What is lost is only what the client does not echo back (thinking a protocol has no field
  for), the same as for a history the service never saw.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Hashable, Sequence

__all__ = ["PendingAnswers"]

logger = logging.getLogger(__name__)


class PendingAnswers:
    """The answer writes of this process not yet finished, by the keys a next request of the
    same conversation can name before it reads anything."""

    def __init__(self) -> None:
        self._pending: dict[Hashable, set[asyncio.Task[None]]] = {}

    def start(self, keys: Sequence[Hashable], write: Callable[[], Awaitable[None]]) -> None:
        """Run ``write`` in a task of its own, known under ``keys`` until it ends."""

        async def run() -> None:
            try:
                await write()
            except Exception:
                # The next request of the conversation stores the answer from its history.
                logger.warning("a proxied answer was not stored", exc_info=True)

        task = asyncio.get_running_loop().create_task(run())
        for key in keys:
            self._pending.setdefault(key, set()).add(task)

        def forget(done: asyncio.Task[None]) -> None:
            for key in keys:
                tasks = self._pending.get(key)
                if tasks is not None:
                    tasks.discard(done)
                    if not tasks:
                        del self._pending[key]

        task.add_done_callback(forget)

    async def wait(self, keys: Sequence[Hashable]) -> None:
        """Until the writes pending under any of ``keys`` (when this is called) have ended."""
        tasks = {t for key in keys for t in self._pending.get(key, ())}
        if tasks:
            # ``wait``, not ``gather``: a caller that goes away does not cancel the writes.
            await asyncio.wait(tasks)

    async def drain(self) -> None:
        """Until every pending write has ended (shutdown, before the database closes)."""
        while self._pending:
            await asyncio.wait({t for tasks in self._pending.values() for t in tasks})
