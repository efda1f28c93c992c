"""``AsyncClient``: every operation of the API, awaitable (the same methods as ``Client``).

The operations are the builders of ``_operations`` bound as methods (``_operation``): each
method takes the builder's arguments, sends its ``Call`` and returns the typed result, so the
signatures and the retry rules of both clients are written once.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import httpx

from ctxsvc_client import _admin as admin_ops
from ctxsvc_client import _item_operations as item_ops
from ctxsvc_client import _operations as ops
from ctxsvc_client import _pins as pin_ops
from ctxsvc_client import _turn_operations as turn_ops
from ctxsvc_client._callkit import Encode
from ctxsvc_client._calls import Call, Retries
from ctxsvc_client._common import (
    STREAM_RECONNECTS,
    ClientOptions,
    event_of,
    method_signature,
    resume_headers,
    transport_error,
)
from ctxsvc_client._errors import StreamError, problem_from_response
from ctxsvc_client._flows import byo_compact_flow, drive_async, run_turn_flow
from ctxsvc_client._function_tools import FunctionTool, tool_table
from ctxsvc_client._inputs import AgentSpec, InputBlock, SandboxSpec
from ctxsvc_client._models import Checkpoint, Event, Session, SummaryRequest, Turn
from ctxsvc_client._sse import SSEDecoder
from ctxsvc_client._tools import ToolFunction

__all__ = ["AsyncClient"]

T = TypeVar("T")
P = ParamSpec("P")


def _operation(
    builder: Callable[P, Call[T]],
) -> Callable[Concatenate[AsyncClient, P], Awaitable[T]]:
    """``builder`` as a method that sends its call."""

    @functools.wraps(builder)
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.send(builder(*args, **kwargs))

    method.__signature__ = method_signature(builder)  # type: ignore[attr-defined]
    return method


class AsyncClient:
    """An asyncio client of one ctxsvc service (the arguments are ``Client``'s).

    ``base_url`` is the service's root (``http://127.0.0.1:8000``); ``api_key`` one of its
    ``CTXSVC_API_KEYS`` (sent as ``Authorization: Bearer``). ``timeout`` is per request, in
    seconds (a compaction is waited for up to 10 minutes). Calls that are safe to repeat are
    retried ``max_retries`` times on connection errors, 429 and 503, with exponential backoff
    from ``backoff`` seconds up to ``max_backoff`` (or the server's ``Retry-After``).
    ``transport`` replaces httpx's (tests, proxies).
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
        backoff: float = 0.5,
        max_backoff: float = 8.0,
        stream_read_timeout: float = 60.0,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._options = ClientOptions.make(base_url, api_key, timeout, stream_read_timeout, headers)
        # The FunctionTools of the sessions this client created (``run_turn`` runs them).
        self._session_tools: dict[str, dict[str, FunctionTool]] = {}
        self.retries = Retries(max_retries, backoff, max_backoff)
        self._http = httpx.AsyncClient(
            base_url=self._options.base_url,
            headers=self._options.headers,
            timeout=self._options.timeout,
            transport=transport,
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def send(self, call: Call[T]) -> T:
        """Send ``call``, repeating it as its retry rules allow; raise what the answer says."""
        retry = 0
        while True:
            retry += 1
            try:
                response = await self._http.request(
                    call.method,
                    call.url,
                    params=call.params,
                    json=call.json,
                    timeout=self._options.timeout_for(call),
                )
            except httpx.TransportError as exc:
                delay = self.retries.after_error(call, retry, exc)
                if delay is None:
                    raise transport_error(call, exc) from exc
            else:
                if response.is_success or response.status_code in call.accept:
                    return call.parse(response)
                delay = self.retries.after_response(call, retry, response)
                if delay is None:
                    raise problem_from_response(response)
            await asyncio.sleep(delay)

    # ----- service ------------------------------------------------------------------------------

    health = _operation(ops.health)
    ready = _operation(ops.ready)
    metrics = _operation(ops.metrics)

    # ----- stateless ----------------------------------------------------------------------------

    prepare = _operation(ops.prepare)
    count_tokens = _operation(ops.count_tokens)

    # ----- models -------------------------------------------------------------------------------

    list_models = _operation(ops.list_models)
    get_model = _operation(ops.get_model)
    put_model = _operation(ops.put_model)
    delete_model = _operation(ops.delete_model)

    # ----- sessions and messages ----------------------------------------------------------------

    async def create_session(
        self,
        *,
        model_id: str,
        agent: AgentSpec,
        title: str | None = None,
        summary_model_id: str | None = None,
        workspace: Mapping[str, Any] | None = None,
        sandbox: SandboxSpec | None = None,
        disabled_skills: Sequence[str] | None = None,
    ) -> Session:
        """Create a session: its model, agent (system prompt, tools), workspace, sandbox.

        A ``FunctionTool`` among the agent's tools is sent as its schema and remembered for the
        session: ``run_turn`` of this client runs its calls without being given it again."""
        session: Session = await self.send(
            ops.create_session(
                model_id=model_id,
                agent=agent,
                title=title,
                summary_model_id=summary_model_id,
                workspace=workspace,
                sandbox=sandbox,
                disabled_skills=disabled_skills,
            )
        )
        functions = ops.session_functions(agent)
        if functions:
            self._session_tools[session.id] = functions
        return session

    list_sessions = _operation(ops.list_sessions)
    get_session = _operation(ops.get_session)
    update_session = _operation(ops.update_session)
    append_messages = _operation(ops.append_messages)
    list_messages = _operation(ops.list_messages)
    get_context = _operation(ops.get_context)
    prepare_session = _operation(ops.prepare_session)

    # ----- turns --------------------------------------------------------------------------------

    start_turn = _operation(turn_ops.start_turn)
    get_turn = _operation(turn_ops.get_turn)
    list_turns = _operation(turn_ops.list_turns)
    post_tool_results = _operation(turn_ops.post_tool_results)
    cancel_turn = _operation(turn_ops.cancel_turn)
    send_agent_message = _operation(turn_ops.send_agent_message)

    # ----- a session kept as OpenAI Responses items (``ctxsvc_client.agents``) ----------------

    add_items = _operation(item_ops.add_items)
    pop_item = _operation(item_ops.pop_item)
    new_epoch = _operation(item_ops.new_epoch)
    # ----- admin (a key with the admin scope) -------------------------------------------------

    create_key = _operation(admin_ops.create_key)
    list_keys = _operation(admin_ops.list_keys)
    rotate_key = _operation(admin_ops.rotate_key)
    revoke_key = _operation(admin_ops.revoke_key)
    put_shared_model = _operation(admin_ops.put_shared_model)
    delete_shared_model = _operation(admin_ops.delete_shared_model)

    # ----- pins ---------------------------------------------------------------------------------

    list_pins = _operation(pin_ops.list_pins)
    create_pin = _operation(pin_ops.create_pin)
    get_pin = _operation(pin_ops.get_pin)
    replace_pin = _operation(pin_ops.replace_pin)
    remove_pin = _operation(pin_ops.remove_pin)
    list_pin_proposals = _operation(pin_ops.list_pin_proposals)
    accept_pin_proposal = _operation(pin_ops.accept_pin_proposal)
    dismiss_pin_proposal = _operation(pin_ops.dismiss_pin_proposal)

    # ----- compaction ---------------------------------------------------------------------------

    compact = _operation(turn_ops.compact)
    get_summary_request = _operation(turn_ops.get_summary_request)
    list_compactions = _operation(turn_ops.list_compactions)
    get_compaction = _operation(turn_ops.get_compaction)
    rewind = _operation(turn_ops.rewind)
    replay = _operation(turn_ops.replay)
    transcript = _operation(turn_ops.transcript)
    reload_session = _operation(turn_ops.reload_session)

    # ----- live updates and helpers ----------------------------------------------------------

    async def events(
        self, session_id: str, *, after: int | None = None, reconnects: int = STREAM_RECONNECTS
    ) -> AsyncIterator[Event]:
        """The session's live updates, for as long as you iterate (stop to disconnect).

        Starts after update ``after`` (``None``: every stored update first). A dropped
        connection is resumed with ``Last-Event-ID`` = the last durable update received, so no
        update is lost or repeated (deltas are never replayed); ``reconnects`` failed
        reconnections in a row raise ``StreamError``.
        """
        last = after
        failures = 0
        while True:
            try:
                async with self._http.stream(
                    "GET",
                    turn_ops.events_url(session_id),
                    headers=resume_headers(last),
                    timeout=self._options.stream_timeout,
                ) as response:
                    if not response.is_success:
                        await response.aread()
                        raise problem_from_response(response)
                    failures = 0
                    decoder = SSEDecoder()
                    async for line in response.aiter_lines():
                        sse = decoder.feed(line)
                        if sse is not None and sse.data:
                            event = event_of(sse)
                            last = event.sequence if event.sequence is not None else last
                            yield event
            except httpx.TransportError as exc:
                failures += 1
                if failures > reconnects:
                    raise StreamError(f"the event stream of {session_id} broke: {exc}") from exc
                await asyncio.sleep(self.retries.delay(failures))

    async def run_turn(
        self,
        session_id: str,
        input: str | Sequence[InputBlock],
        *,
        tools: Mapping[str, ToolFunction] | Sequence[FunctionTool] | None = None,
        client_request_id: str | None = None,
    ) -> Turn:
        """Run a whole turn: start it, run your tools as their calls come, return it finished.

        ``tools``: the ``FunctionTool``s this client's ``create_session`` was given for the
        session unless passed (a list of ``FunctionTool``s, or a mapping); see
        ``function_tool`` for their schema and error rule. A mapping maps a tool name to a
        function called with the model's arguments as keyword
        arguments (a coroutine function is awaited; a plain one runs on the event loop; one
        call at a time, in the provider's order); what it returns is the result (a string,
        content blocks, a ``ToolResult``, or anything JSON can write); an exception becomes an
        ``error`` result the model sees.
        The finished turn is returned whatever its status (see ``status`` and ``final_text``).
        """
        table = self._session_tools.get(session_id, {}) if tools is None else tool_table(tools)
        flow = run_turn_flow(session_id, input, table, client_request_id)
        return await drive_async(flow, self.send)

    async def byo_compact(
        self,
        session_id: str,
        summarize: Callable[[SummaryRequest], str | Awaitable[str]],
        *,
        encode: Encode | None = None,
        model: str | None = None,
        allow_larger: bool | None = None,
        accept_dropped_user_facts: bool | None = None,
    ) -> Checkpoint:
        """Compact with your own model: ``summarize`` gets the exact summary request (with
        ``provider_payload`` when ``encode`` names a protocol) and returns the model's answer,
        which the service validates and installs (409 ``conversation_changed`` when the
        conversation moved on meanwhile). ``model`` names your model in the checkpoint;
        ``allow_larger`` and ``accept_dropped_user_facts`` as for ``compact``."""
        return await drive_async(
            byo_compact_flow(
                session_id, summarize, encode, model, allow_larger, accept_dropped_user_facts
            ),
            self.send,
        )
