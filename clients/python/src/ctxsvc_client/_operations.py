"""Every operation of the API as a ``Call`` (what to send, how to read the answer, whether it
may be repeated). ``Client`` and ``AsyncClient`` send these; nothing here does I/O."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel, TypeAdapter

from ctxsvc_client._calls import Call, path
from ctxsvc_client._inputs import AgentSpec, InputBlock, MessageIn, SandboxSpec, ToolResultIn
from ctxsvc_client._inputs import input_blocks as _input_blocks
from ctxsvc_client._models import (
    AgentMessageReceipt,
    AppendedMessage,
    Checkpoint,
    CheckpointPage,
    Context,
    MessagePage,
    Model,
    Prepared,
    ReloadResult,
    Replay,
    Session,
    SessionPage,
    SessionPrepared,
    SummaryRequest,
    TokenCount,
    ToolResultsAnswer,
    Transcript,
    Turn,
    TurnPage,
)

M = TypeVar("M", bound=BaseModel)
Encode = Literal["openai_chat", "anthropic_messages"]

# A manual compaction with the service's own model may take its attempts (3 × 120 s by
# default) and the delays between them: its answer is waited for longer than other calls.
COMPACTION_TIMEOUT_SECONDS = 600.0


def _model(cls: type[M]) -> Callable[[httpx.Response], M]:
    return lambda response: cls.model_validate_json(response.content)


def _list_of(cls: type[M], key: str | None = None) -> Callable[[httpx.Response], list[M]]:
    adapter = TypeAdapter(list[cls])  # type: ignore[valid-type]

    def parse(response: httpx.Response) -> list[M]:
        value = response.json() if key is None else response.json()[key]
        result: list[M] = adapter.validate_python(value)
        return result

    return parse


def _body(**fields: Any) -> dict[str, Any]:
    """The fields that were given (``None`` leaves the server's default)."""
    return {k: v for k, v in fields.items() if v is not None}


def _wait(wait: bool) -> dict[str, str] | None:
    return {"wait": "true"} if wait else None


def _sessions(session_id: str, *rest: str) -> str:
    return path("v1", "sessions", session_id, *rest)


# ----- service -------------------------------------------------------------------------------


def health() -> Call[dict[str, Any]]:
    """``GET /healthz``: the process is alive."""
    return Call("GET", "/healthz", lambda r: dict(r.json()), idempotent=True)


def ready() -> Call[bool]:
    """``GET /readyz``: ``True`` when the database is reachable and migrated."""
    # 503 is an answer here ("not ready"), not an error to retry.
    return Call("GET", "/readyz", lambda r: r.status_code == 200, accept=frozenset({503}))


def metrics() -> Call[str]:
    """``GET /metrics``: the Prometheus text."""
    return Call("GET", "/metrics", lambda r: r.text, idempotent=True)


# ----- stateless -----------------------------------------------------------------------------


def prepare(
    *,
    conversation: Sequence[MessageIn],
    system_context: Sequence[Mapping[str, Any]] = (),
    tools: Sequence[Mapping[str, Any]] = (),
    model: Mapping[str, Any] | None = None,
    model_id: str | None = None,
    tool_result_pruning: Mapping[str, Any] | None = None,
    encode: Encode | None = None,
) -> Call[Prepared]:
    """``POST /v1/prepare``: a request prepared from what you send; nothing is stored."""
    body = _body(
        system_context=list(system_context),
        conversation=list(conversation),
        tools=list(tools),
        model=model,
        model_id=model_id,
        tool_result_pruning=tool_result_pruning,
        encode=encode,
    )
    return Call("POST", "/v1/prepare", _model(Prepared), json=body, idempotent=True)


def count_tokens(
    *,
    text: str | None = None,
    content: Sequence[Mapping[str, Any]] | None = None,
    prepare: Mapping[str, Any] | None = None,
    counter: str | None = None,
) -> Call[TokenCount]:
    """``POST /v1/tokens/count``: exactly one of ``text``, ``content`` or ``prepare``."""
    body = _body(
        counter=counter,
        text=text,
        content=None if content is None else list(content),
        prepare=prepare,
    )
    return Call("POST", "/v1/tokens/count", _model(TokenCount), json=body, idempotent=True)


# ----- models --------------------------------------------------------------------------------


def list_models() -> Call[list[Model]]:
    """The built-in catalogue and the registered models."""
    return Call("GET", "/v1/models", _list_of(Model), idempotent=True)


def get_model(model_id: str) -> Call[Model]:
    """One model with its derived limits and calibration."""
    return Call("GET", path("v1", "models", model_id), _model(Model), idempotent=True)


def put_model(
    model_id: str,
    *,
    context_window_tokens: int,
    max_output_tokens: int,
    provider: Mapping[str, Any],
    max_reasoning_tokens: int | None = None,
    accepts_data_blocks: bool | None = None,
    fixed_reserve_tokens: int | None = None,
    safety_margin_tokens: int | None = None,
    token_counter: str | None = None,
) -> Call[Model]:
    """Register or replace a model; ``provider`` is ``{kind, base_url, model_name, ...}``."""
    body = _body(
        context_window_tokens=context_window_tokens,
        max_output_tokens=max_output_tokens,
        max_reasoning_tokens=max_reasoning_tokens,
        accepts_data_blocks=accepts_data_blocks,
        fixed_reserve_tokens=fixed_reserve_tokens,
        safety_margin_tokens=safety_margin_tokens,
        token_counter=token_counter,
        provider=dict(provider),
    )
    # PUT replaces: sending it twice leaves the same model.
    return Call("PUT", path("v1", "models", model_id), _model(Model), json=body, idempotent=True)


def delete_model(model_id: str) -> Call[None]:
    """Remove a registered model (409 ``model_in_use`` while sessions use it)."""
    return Call("DELETE", path("v1", "models", model_id), lambda r: None)


# ----- sessions and messages -----------------------------------------------------------------


def create_session(
    *,
    model_id: str,
    agent: AgentSpec,
    title: str | None = None,
    summary_model_id: str | None = None,
    workspace: Mapping[str, Any] | None = None,
    sandbox: SandboxSpec | None = None,
    disabled_skills: Sequence[str] | None = None,
) -> Call[Session]:
    """Create a session: its model, agent (system prompt, tools), workspace, sandbox."""
    body = _body(
        title=title,
        model_id=model_id,
        summary_model_id=summary_model_id,
        agent=dict(agent),
        workspace=workspace,
        sandbox=sandbox,
        disabled_skills=None if disabled_skills is None else list(disabled_skills),
    )
    return Call("POST", "/v1/sessions", _model(Session), json=body)


def list_sessions(*, limit: int | None = None, cursor: str | None = None) -> Call[SessionPage]:
    """Sessions, newest first; pass ``next_cursor`` for the next page."""
    params = _body(limit=limit, cursor=cursor)
    return Call("GET", "/v1/sessions", _model(SessionPage), params=params, idempotent=True)


def get_session(session_id: str) -> Call[Session]:
    """One session (with ``usage``: what its turns cost)."""
    return Call("GET", _sessions(session_id), _model(Session), idempotent=True)


class Unset:
    """The default of ``update_session``'s fields: left as they are (``None`` clears a title)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset()


def update_session(
    session_id: str,
    *,
    title: str | Unset | None = UNSET,
    model_id: str | Unset = UNSET,
    summary_model_id: str | Unset = UNSET,
    sandbox: SandboxSpec | Unset = UNSET,
    disabled_skills: Sequence[str] | Unset = UNSET,
    workspace: Mapping[str, Any] | Unset = UNSET,
) -> Call[Session]:
    """Change a session: only the fields given (``title=None`` clears the title)."""
    given = {
        "title": title,
        "model_id": model_id,
        "summary_model_id": summary_model_id,
        "sandbox": sandbox,
        "disabled_skills": disabled_skills
        if isinstance(disabled_skills, Unset)
        else list(disabled_skills),
        "workspace": workspace,
    }
    changes = {k: v for k, v in given.items() if not isinstance(v, Unset)}
    return Call("PATCH", _sessions(session_id), _model(Session), json=changes)


def append_messages(session_id: str, messages: Sequence[MessageIn]) -> Call[list[AppendedMessage]]:
    """Append messages, all or nothing (SPEC §5); their ids and sequences."""
    # Never repeated after it may have reached the service: a second append stores twice.
    body = {"messages": list(messages)}
    url = _sessions(session_id, "messages")
    return Call("POST", url, _list_of(AppendedMessage, "messages"), json=body)


def list_messages(
    session_id: str, *, after_sequence: int = 0, limit: int | None = None
) -> Call[MessagePage]:
    """The stored messages after ``after_sequence``, in order."""
    params = _body(after_sequence=after_sequence, limit=limit)
    url = _sessions(session_id, "messages")
    return Call("GET", url, _model(MessagePage), params=params, idempotent=True)


def get_context(session_id: str, *, encode: Encode | None = None) -> Call[Context]:
    """What the model would see next (read-only; no World State sampling)."""
    url = _sessions(session_id, "context")
    return Call("GET", url, _model(Context), params=_body(encode=encode), idempotent=True)


def prepare_session(session_id: str, *, encode: Encode | None = None) -> Call[SessionPrepared]:
    """The next request for your own model: samples World State (stored), may compact."""
    # Not repeated on 429/503: it may compact the session (SPEC §6) before it answers.
    url = _sessions(session_id, "prepare")
    return Call(
        "POST",
        url,
        _model(SessionPrepared),
        json={},
        params=_body(encode=encode),
        timeout=COMPACTION_TIMEOUT_SECONDS,
    )


# ----- turns ---------------------------------------------------------------------------------


def start_turn(
    session_id: str,
    input: str | Sequence[InputBlock],
    *,
    client_request_id: str | None = None,
    wait: bool = False,
) -> Call[Turn]:
    """Start a turn (``input``: a string or input blocks); a ``client_request_id`` is generated
    when none is given, and repeating a start with it returns the same turn."""
    # The same client_request_id names the same turn: repeating the start is safe.
    body = {
        "client_request_id": client_request_id or uuid.uuid4().hex,
        "input": _input_blocks(input),
    }
    url = _sessions(session_id, "turns")
    return Call("POST", url, _model(Turn), json=body, params=_wait(wait), idempotent=True)


def get_turn(session_id: str, turn_id: str, *, wait: bool = False) -> Call[Turn]:
    """A turn; with ``wait`` the answer comes when it is terminal or waits for tool results."""
    url = _sessions(session_id, "turns", turn_id)
    return Call("GET", url, _model(Turn), params=_wait(wait), idempotent=True)


def list_turns(
    session_id: str, *, limit: int | None = None, cursor: str | None = None
) -> Call[TurnPage]:
    """The session's turns, newest first; pass ``next_cursor`` for the next page."""
    params = _body(limit=limit, cursor=cursor)
    url = _sessions(session_id, "turns")
    return Call("GET", url, _model(TurnPage), params=params, idempotent=True)


def post_tool_results(
    session_id: str, turn_id: str, results: Sequence[ToolResultIn], *, wait: bool = False
) -> Call[ToolResultsAnswer]:
    """Results of your tool calls; the turn goes on once every pending call has one."""
    url = _sessions(session_id, "turns", turn_id, "tool-results")
    body = {"results": list(results)}
    return Call("POST", url, _model(ToolResultsAnswer), json=body, params=_wait(wait))


def cancel_turn(session_id: str, turn_id: str) -> Call[Turn]:
    """Cancel a running turn; answers once it is terminal."""
    return Call("POST", _sessions(session_id, "turns", turn_id, "cancel"), _model(Turn), json={})


def send_agent_message(
    session_id: str,
    *,
    task: str,
    kind: Literal["final_answer", "interrupted", "failed"],
    body: str,
    agent_message_id: str | None = None,
) -> Call[AgentMessageReceipt]:
    """Queue a message from a sub-agent or another service (read before the next model call)."""
    # With an id the same message is queued once, so it is safe to repeat: one is generated.
    payload = {
        "task": task,
        "kind": kind,
        "body": body,
        "agent_message_id": agent_message_id or uuid.uuid4().hex,
    }
    url = _sessions(session_id, "agent-messages")
    return Call("POST", url, _model(AgentMessageReceipt), json=payload, idempotent=True)


# ----- compaction ----------------------------------------------------------------------------


def compact(
    session_id: str,
    *,
    summary: str | None = None,
    model: str | None = None,
    expected_through_message_sequence: int | None = None,
) -> Call[Checkpoint]:
    """Compact now with the session's summary model, or install your own model's ``summary``."""
    body = _body(
        summary=summary,
        model=model,
        expected_through_message_sequence=expected_through_message_sequence,
    )
    url = _sessions(session_id, "compactions")
    return Call("POST", url, _model(Checkpoint), json=body, timeout=COMPACTION_TIMEOUT_SECONDS)


def get_summary_request(session_id: str, *, encode: Encode | None = None) -> Call[SummaryRequest]:
    """The exact summary request your own model should answer."""
    url = _sessions(session_id, "compactions", "request")
    return Call("GET", url, _model(SummaryRequest), params=_body(encode=encode), idempotent=True)


def list_compactions(
    session_id: str, *, limit: int | None = None, before_sequence: int | None = None
) -> Call[CheckpointPage]:
    """Checkpoints, newest first (without summary and reminder)."""
    params = _body(limit=limit, before_sequence=before_sequence)
    url = _sessions(session_id, "compactions")
    return Call("GET", url, _model(CheckpointPage), params=params, idempotent=True)


def get_compaction(session_id: str, compaction_id: str) -> Call[Checkpoint]:
    """One checkpoint: summary, reminder, boundaries, token figures."""
    url = _sessions(session_id, "compactions", compaction_id)
    return Call("GET", url, _model(Checkpoint), idempotent=True)


def rewind(session_id: str, compaction_id: str) -> Call[Checkpoint]:
    """Reinstall an earlier checkpoint as a new ``rewind`` checkpoint (nothing is deleted)."""
    body = {"compaction_id": compaction_id}
    return Call("POST", _sessions(session_id, "rewind"), _model(Checkpoint), json=body)


def replay(session_id: str, selector: str = "latest") -> Call[Replay]:
    """A projection, read-only: ``latest``, ``compaction:{id}`` or ``through_message:{n}``."""
    url = _sessions(session_id, "replay")
    return Call("GET", url, _model(Replay), params={"selector": selector}, idempotent=True)


def transcript(
    session_id: str,
    *,
    compaction_id: str | None = None,
    after_sequence: int = 0,
    limit: int | None = None,
) -> Call[Transcript]:
    """The raw messages a checkpoint covers, a page at a time."""
    params = _body(compaction_id=compaction_id, after_sequence=after_sequence, limit=limit)
    url = _sessions(session_id, "transcript")
    return Call("GET", url, _model(Transcript), params=params, idempotent=True)


def reload_session(session_id: str) -> Call[ReloadResult]:
    """Rebuild a session flagged ``reload_required`` from the database."""
    return Call("POST", _sessions(session_id, "reload"), _model(ReloadResult), json={})


def events_url(session_id: str) -> str:
    return _sessions(session_id, "events")
