"""The helpers' logic (``run_turn``, ``byo_compact``) written once, without I/O.

A flow is a generator that yields what it needs done: a ``Call`` to send, or an ``Invocation``
of the caller's function. ``Client`` and ``AsyncClient`` drive it (``drive_sync`` /
``drive_async``), sending back each answer, or throwing in the ``CtxsvcError`` a call raised.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from ctxsvc_client import _turn_operations as turn_ops
from ctxsvc_client._callkit import Encode
from ctxsvc_client._calls import Call
from ctxsvc_client._errors import ConflictError, CtxsvcError, TransportError
from ctxsvc_client._inputs import InputBlock, ToolResultIn
from ctxsvc_client._models import Checkpoint, SummaryRequest, Turn
from ctxsvc_client._tools import (
    ToolFunction,
    call_arguments,
    exception_result,
    propagates,
    result_of,
)

__all__ = ["Flow", "Invocation", "byo_compact_flow", "drive_async", "drive_sync", "run_turn_flow"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Invocation:
    """A call of the caller's function. With ``capture`` an exception is handed back to the
    flow as the value (a tool's failure is a result); otherwise it propagates."""

    function: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] | None = None
    capture: bool = False


@dataclass(frozen=True, slots=True)
class Raised:
    error: Exception


Step: TypeAlias = Call[Any] | Invocation
Flow: TypeAlias = Generator[Step, Any, T]

# A post that may have reached the service (or arrived twice): the turn is read again instead.
_SETTLED_CODES = frozenset({"tool_result_already_posted", "turn_not_waiting"})


def run_turn_flow(
    session_id: str,
    input: str | Sequence[InputBlock],
    tools: Mapping[str, ToolFunction],
    client_request_id: str | None,
) -> Flow[Turn]:
    turn: Turn = yield turn_ops.start_turn(
        session_id, input, client_request_id=client_request_id, wait=True
    )
    # Results by call id: a result computed once is never computed again, even if its post
    # has to be repeated.
    known: dict[str, ToolResultIn] = {}
    while not turn.terminal:
        if not turn.waiting_for_tools:
            turn = yield turn_ops.get_turn(session_id, turn.turn_id, wait=True)
            continue
        results: list[ToolResultIn] = []
        for call in turn.pending_tool_calls:
            if call.tool_call_id not in known:
                step = call_arguments(call, tools)
                if isinstance(step, tuple):
                    function, arguments = step
                    value = yield Invocation(
                        function, kwargs=arguments, capture=not propagates(function)
                    )
                    step = (
                        exception_result(call, value.error)
                        if isinstance(value, Raised)
                        else result_of(call, value)
                    )
                known[call.tool_call_id] = step
            results.append(known[call.tool_call_id])
        try:
            turn = yield turn_ops.post_tool_results(session_id, turn.turn_id, results, wait=True)
        except TransportError:
            turn = yield turn_ops.get_turn(
                session_id, turn.turn_id
            )  # did it arrive? read and go on
        except ConflictError as conflict:
            if conflict.code not in _SETTLED_CODES:
                raise
            turn = yield turn_ops.get_turn(session_id, turn.turn_id)
    return turn


def byo_compact_flow(
    session_id: str,
    summarize: Callable[[SummaryRequest], Any],
    encode: Encode | None,
    model: str | None,
    allow_larger: bool | None = None,
    accept_dropped_user_facts: bool | None = None,
) -> Flow[Checkpoint]:
    request: SummaryRequest = yield turn_ops.get_summary_request(session_id, encode=encode)
    summary = yield Invocation(summarize, (request,))
    checkpoint: Checkpoint = yield turn_ops.compact(
        session_id,
        summary=summary,
        model=model or request.summary_model_id,
        # What the summary covers: messages appended while ``summarize`` ran stay after it.
        through_message_sequence=request.through_message_sequence,
        allow_larger=allow_larger,
        accept_dropped_user_facts=accept_dropped_user_facts,
    )
    return checkpoint


def drive_sync(flow: Flow[T], send: Callable[[Call[Any]], Any]) -> T:
    answer: Any = None
    error: CtxsvcError | None = None
    while True:
        try:
            step = flow.throw(error) if error is not None else flow.send(answer)
        except StopIteration as done:
            result: T = done.value
            return result
        answer, error = None, None
        if isinstance(step, Invocation):
            answer = _invoke_sync(step)
            continue
        try:
            answer = send(step)
        except CtxsvcError as exc:
            error = exc


async def drive_async(flow: Flow[T], send: Callable[[Call[Any]], Any]) -> T:
    answer: Any = None
    error: CtxsvcError | None = None
    while True:
        try:
            step = flow.throw(error) if error is not None else flow.send(answer)
        except StopIteration as done:
            result: T = done.value
            return result
        answer, error = None, None
        if isinstance(step, Invocation):
            answer = await _invoke_async(step)
            continue
        try:
            answer = await send(step)
        except CtxsvcError as exc:
            error = exc


def _invoke_sync(step: Invocation) -> Any:
    try:
        value = step.function(*step.args, **(step.kwargs or {}))
        if inspect.isawaitable(value):
            # A coroutine function given to the blocking client: it cannot be awaited here.
            _close(value)
            raise TypeError(f"{_name(step.function)} is async: use AsyncClient to run it")
        return value
    except Exception as exc:
        if not step.capture:
            raise
        return Raised(exc)


async def _invoke_async(step: Invocation) -> Any:
    try:
        value = step.function(*step.args, **(step.kwargs or {}))
        if inspect.isawaitable(value):
            value = await value
        return value
    except Exception as exc:
        if not step.capture:
            raise
        return Raised(exc)


def _close(awaitable: Any) -> None:
    close = getattr(awaitable, "close", None)
    if close is not None:
        close()  # no "coroutine was never awaited" warning


def _name(function: Callable[..., Any]) -> str:
    return getattr(function, "__name__", repr(function))
