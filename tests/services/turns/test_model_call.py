"""A turn's model call and its cancel (``services/turns/model_call.call_model``): a cancel
abandons the pending call at once and closes it; an answer that came first is kept; the runner
being stopped is not taken for a cancel."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import pytest

from app.core.caching.breakpoints import CachePlan
from app.core.content import Item
from app.providers.base import ModelResponse, StreamSink
from app.services.turns.model_call import CallAbandoned, LiveSink, call_model

pytestmark = pytest.mark.anyio

ANSWER = ModelResponse(text="the answer")


class Pending:
    """A model call that waits for its answer until ``answer`` is set; records whether it was
    closed (cancelled) and what it did last."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.answer = asyncio.Event()
        self.closed = False

    async def complete(
        self,
        request: dict[str, Any],
        *,
        sink: StreamSink | None = None,
        caching: CachePlan | None = None,
        conversation: Sequence[Item] | None = None,
    ) -> ModelResponse:
        self.started.set()
        try:
            await self.answer.wait()
        except asyncio.CancelledError:
            self.closed = True
            raise
        return ANSWER


class AnswersWithCancel:
    """The answer arrives in the same step of the event loop as a cancel."""

    def __init__(self, cancel: asyncio.Event) -> None:
        self._cancel = cancel

    async def complete(
        self,
        request: dict[str, Any],
        *,
        sink: StreamSink | None = None,
        caching: CachePlan | None = None,
        conversation: Sequence[Item] | None = None,
    ) -> ModelResponse:
        await asyncio.sleep(0)  # a real call suspends before it answers
        self._cancel.set()
        return ANSWER


SINK: Any = None  # the calls here stream nothing


def model_call(client: Any, cancel: asyncio.Event) -> Any:
    sink: LiveSink = SINK
    return call_model(client, {"messages": []}, sink, cancel)


async def test_a_cancel_abandons_the_pending_call_and_closes_it() -> None:
    client, cancel = Pending(), asyncio.Event()
    call = asyncio.ensure_future(model_call(client, cancel))
    await asyncio.wait_for(client.started.wait(), 30)
    cancel.set()
    with pytest.raises(CallAbandoned):
        await asyncio.wait_for(call, 30)
    assert client.closed


async def test_the_runner_goes_on_after_an_abandoned_call() -> None:
    client, cancel = Pending(), asyncio.Event()

    async def runner() -> str:
        with contextlib.suppress(CallAbandoned):
            await model_call(client, cancel)
        # Its next awaits and deadlines work as before the cancel.
        async with asyncio.timeout(30):
            await asyncio.sleep(0)
        return "went on"

    leg = asyncio.ensure_future(runner())
    await asyncio.wait_for(client.started.wait(), 30)
    cancel.set()
    assert await asyncio.wait_for(leg, 30) == "went on"


async def test_a_cancel_set_before_the_call_sends_nothing() -> None:
    client, cancel = Pending(), asyncio.Event()
    cancel.set()
    with pytest.raises(CallAbandoned):
        await model_call(client, cancel)
    assert not client.started.is_set()


async def test_an_answer_that_comes_with_the_cancel_is_kept() -> None:
    cancel = asyncio.Event()
    assert await model_call(AnswersWithCancel(cancel), cancel) is ANSWER
    # The cancel is the runner's to see next (its flag); it does not interrupt what the runner
    # does after the call: these steps would raise CancelledError if it did.
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_stopping_runner_is_not_taken_for_a_cancel() -> None:
    client, cancel = Pending(), asyncio.Event()
    leg = asyncio.ensure_future(model_call(client, cancel))
    await asyncio.wait_for(client.started.wait(), 30)
    leg.cancel()  # the process is stopping: its runner tasks are cancelled
    with pytest.raises(asyncio.CancelledError):
        await leg
    assert client.closed
    assert not cancel.is_set()


async def test_the_answer_is_returned_when_no_cancel_comes() -> None:
    client, cancel = Pending(), asyncio.Event()
    call = asyncio.ensure_future(model_call(client, cancel))
    await asyncio.wait_for(client.started.wait(), 30)
    client.answer.set()
    assert await asyncio.wait_for(call, 30) is ANSWER
