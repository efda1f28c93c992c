"""A model call overlapped with the commit of the step that prepared it.

A tool round's step stores the response and its results and prepares the next request; what is
left of it once the request is built is sending its deferred writes and the COMMIT
(``app.storage.deferred``): on PostgreSQL two round trips, on SQLite the statements themselves.
Nothing in the next request depends on them, and the provider takes far longer to answer than
they take, so the runner sends the request first and commits while the provider works:

1. the step ends with its transaction still open (``PendingStep``: all of its work done, the
   session row still locked, nothing visible to anyone else);
2. the next call starts; once its request is written to the connection (the adapter says so:
   ``app.providers.call_stats.note_sent``; an adapter that cannot say so is not overlapped), the
   step commits — and only then does what waited for the commit (the process-wide
   Conversation cache, the live deltas of the new call, held meanwhile so that no listener sees
   them before the step's updates);
3. a commit that fails, or finds the turn lost, abandons the call (its connection is closed) and
   ends the turn as a failed step always did; a cancel the commit finds abandons it as a cancel
   during a call does.

The step is a value the next call's state carries (``app.services.turns.step.Calling.pending``)
and ``send`` takes; whatever else ends the loop while it is pending commits it first
(``PendingStep.settle``): every later event happened after it, as when the step committed
before the call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from typing import TypeVar

from app.core.caching.breakpoints import plan_for
from app.core.capabilities import PromptCaching
from app.core.pipeline.prepared_call import PreparedModelCall
from app.providers.base import ModelClient, ModelResponse
from app.providers.call_stats import stop_watching_sent, watch_sent
from app.services.turns.model_call import CallAbandoned, LiveSink, call_model
from app.services.turns.outcomes import TurnEnded

__all__ = ["PendingStep", "overlapped", "send", "signals_sent"]

T = TypeVar("T")


def signals_sent(client: ModelClient) -> bool:
    """Whether ``client`` says when a request is written: only then is a commit overlapped
    with its calls (the offline clients and test doubles that do not say so never are)."""
    return bool(getattr(client, "signals_sent", False))


class PendingStep:
    """A step's open transaction (its exit stack), what to do once it committed, and ``done``:
    resolved when it committed (or with what its commit raised)."""

    def __init__(self, stack: AsyncExitStack) -> None:
        self._stack = stack
        self.after: list[Callable[[], None]] = []
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._committing: asyncio.Future[None] | None = None

    async def commit(self) -> None:
        """Commit (the step's own failure handling applies: a refused write raises what the
        step raises), then run ``after``. A cancellation meanwhile (the process stopping) waits
        for the commit to end first: the step is stored as it would have been before the call,
        and the turn it belongs to can then be interrupted."""
        if self._committing is None:
            self._committing = asyncio.ensure_future(self._commit())
        try:
            await asyncio.shield(self._committing)
        except asyncio.CancelledError:
            if not self._committing.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await self._committing
            raise

    async def settle(self) -> None:
        """Commit, unless a call took this step already (``overlapped``: it committed, or
        what its commit raised ended that call)."""
        if self._committing is None:
            await self.commit()

    async def _commit(self) -> None:
        try:
            await self._stack.aclose()
            for action in self.after:
                action()
        except BaseException as exc:
            if not self.done.done():
                self.done.set_exception(exc)
                self.done.exception()  # retrieved: nobody need be waiting for it
            raise
        self.done.set_result(None)


async def send(
    client: ModelClient,
    prepared: PreparedModelCall,
    pending: PendingStep | None,
    sink: LiveSink,
    cancel: asyncio.Event,
    *,
    prompt_caching: PromptCaching,
    seed: str,
) -> ModelResponse:
    """The model call of ``prepared`` (with its cache breakpoints), committing ``pending``
    while its request goes out; a cancel meanwhile ends the turn ``cancelled``."""
    caching = plan_for(
        prepared,
        prompt_caching=prompt_caching,
        seed=seed,
        stable_messages=prepared.stable_messages,
    )
    try:
        if pending is None:
            return await call_model(client, prepared.request, sink, cancel, caching, prepared.items)
        return await overlapped(
            pending,
            sink,
            lambda: call_model(client, prepared.request, sink, cancel, caching, prepared.items),
        )
    except CallAbandoned:
        raise TurnEnded("cancelled") from None


async def overlapped(pending: PendingStep, sink: LiveSink, call: Callable[[], Awaitable[T]]) -> T:
    """Run ``call()`` and commit ``pending`` as soon as its request is written; ``call``'s
    result, or the commit's failure (the call abandoned)."""
    sent = asyncio.Event()
    sink.hold()
    token = watch_sent(sent)  # the call's task copies this context
    try:
        task = asyncio.ensure_future(call())
    finally:
        stop_watching_sent(token)
    task.add_done_callback(lambda _: sent.set())  # failed or finished before writing anything
    try:
        await sent.wait()
        await pending.commit()
    except BaseException:
        sink.release(drop=True)
        task.cancel()
        # Its outcome is taken: an exception nobody retrieves is logged when collected.
        with contextlib.suppress(BaseException):
            await task
        raise
    sink.release()
    return await task
