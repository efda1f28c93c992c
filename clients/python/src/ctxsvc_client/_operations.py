"""The operations of the service, stateless prepare, models and sessions as ``Call``s (what to
send, how to read the answer, whether it may be repeated); turns and compaction are in
``_turn_operations``. ``Client`` and ``AsyncClient`` send these; nothing here does I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ctxsvc_client._callkit import (
    COMPACTION_TIMEOUT_SECONDS,
    Encode,
    body_of,
    list_of,
    model_of,
    session_path,
)
from ctxsvc_client._calls import Call, path
from ctxsvc_client._function_tools import FunctionTool
from ctxsvc_client._inputs import AgentSpec, MessageIn, SandboxSpec
from ctxsvc_client._models import (
    AppendedMessage,
    Context,
    MessagePage,
    Model,
    Prepared,
    Session,
    SessionPage,
    SessionPrepared,
    TokenCount,
)

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
    previous_request_digest: str | None = None,
) -> Call[Prepared]:
    """``POST /v1/prepare``: a request prepared from what you send; nothing is stored.
    ``previous_request_digest`` (the ``request_digest`` of your previous prepare) makes the
    budget report the stable prefix against that request."""
    body = body_of(
        system_context=list(system_context),
        conversation=list(conversation),
        tools=list(tools),
        model=model,
        model_id=model_id,
        tool_result_pruning=tool_result_pruning,
        encode=encode,
        previous_request_digest=previous_request_digest,
    )
    return Call("POST", "/v1/prepare", model_of(Prepared), json=body, idempotent=True)


def count_tokens(
    *,
    text: str | None = None,
    content: Sequence[Mapping[str, Any]] | None = None,
    prepare: Mapping[str, Any] | None = None,
    counter: str | None = None,
) -> Call[TokenCount]:
    """``POST /v1/tokens/count``: exactly one of ``text``, ``content`` or ``prepare``."""
    body = body_of(
        counter=counter,
        text=text,
        content=None if content is None else list(content),
        prepare=prepare,
    )
    return Call("POST", "/v1/tokens/count", model_of(TokenCount), json=body, idempotent=True)


# ----- models --------------------------------------------------------------------------------


def list_models() -> Call[list[Model]]:
    """The built-in catalogue and the registered models."""
    return Call("GET", "/v1/models", list_of(Model), idempotent=True)


def get_model(model_id: str) -> Call[Model]:
    """One model with its derived limits and calibration."""
    return Call("GET", path("v1", "models", model_id), model_of(Model), idempotent=True)


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
    prompt_caching: Literal["off", "auto"] | None = None,
    output_reserve_tokens: int | None = None,
) -> Call[Model]:
    """Register or replace a model; ``provider`` is ``{kind, base_url, model_name, ...}``.
    ``output_reserve_tokens``: what each request keeps of the window for the answer (and sends
    as its output limit), at most ``max_output_tokens``; omitted, the service's default rule."""
    body = body_of(
        context_window_tokens=context_window_tokens,
        max_output_tokens=max_output_tokens,
        max_reasoning_tokens=max_reasoning_tokens,
        accepts_data_blocks=accepts_data_blocks,
        fixed_reserve_tokens=fixed_reserve_tokens,
        safety_margin_tokens=safety_margin_tokens,
        token_counter=token_counter,
        prompt_caching=prompt_caching,
        output_reserve_tokens=output_reserve_tokens,
        provider=dict(provider),
    )
    # PUT replaces: sending it twice leaves the same model.
    return Call("PUT", path("v1", "models", model_id), model_of(Model), json=body, idempotent=True)


def delete_model(model_id: str) -> Call[None]:
    """Remove a registered model (409 ``model_in_use`` while sessions use it)."""
    return Call("DELETE", path("v1", "models", model_id), lambda r: None)


# ----- sessions and messages -----------------------------------------------------------------


def agent_body(agent: AgentSpec) -> dict[str, Any]:
    """The agent as sent: a ``FunctionTool`` becomes the tool definition it stands for."""
    body: dict[str, Any] = dict(agent)
    if "tools" in agent:
        body["tools"] = [
            tool.spec() if isinstance(tool, FunctionTool) else dict(tool) for tool in agent["tools"]
        ]
    return body


def session_functions(agent: AgentSpec) -> dict[str, FunctionTool]:
    """The ``FunctionTool``s among the agent's tools, by name (what ``run_turn`` runs)."""
    return {t.name: t for t in agent.get("tools", ()) if isinstance(t, FunctionTool)}


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
    body = body_of(
        title=title,
        model_id=model_id,
        summary_model_id=summary_model_id,
        agent=agent_body(agent),
        workspace=workspace,
        sandbox=sandbox,
        disabled_skills=None if disabled_skills is None else list(disabled_skills),
    )
    return Call("POST", "/v1/sessions", model_of(Session), json=body)


def list_sessions(*, limit: int | None = None, cursor: str | None = None) -> Call[SessionPage]:
    """Sessions, newest first; pass ``next_cursor`` for the next page."""
    params = body_of(limit=limit, cursor=cursor)
    return Call("GET", "/v1/sessions", model_of(SessionPage), params=params, idempotent=True)


def get_session(session_id: str) -> Call[Session]:
    """One session (with ``usage``: what its turns cost)."""
    return Call("GET", session_path(session_id), model_of(Session), idempotent=True)


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
    return Call("PATCH", session_path(session_id), model_of(Session), json=changes)


def append_messages(session_id: str, messages: Sequence[MessageIn]) -> Call[list[AppendedMessage]]:
    """Append messages, all or nothing (spec §5); their ids and sequences."""
    # Never repeated after it may have reached the service: a second append stores twice.
    body = {"messages": list(messages)}
    url = session_path(session_id, "messages")
    return Call("POST", url, list_of(AppendedMessage, "messages"), json=body)


def list_messages(
    session_id: str, *, after_sequence: int = 0, limit: int | None = None
) -> Call[MessagePage]:
    """The stored messages after ``after_sequence``, in order."""
    params = body_of(after_sequence=after_sequence, limit=limit)
    url = session_path(session_id, "messages")
    return Call("GET", url, model_of(MessagePage), params=params, idempotent=True)


def get_context(session_id: str, *, encode: Encode | None = None) -> Call[Context]:
    """What the model would see next (read-only; no World State sampling)."""
    url = session_path(session_id, "context")
    return Call("GET", url, model_of(Context), params=body_of(encode=encode), idempotent=True)


def prepare_session(session_id: str, *, encode: Encode | None = None) -> Call[SessionPrepared]:
    """The next request for your own model: samples World State (stored), may compact."""
    # Not repeated on 429/503: it may compact the session (spec §6) before it answers.
    url = session_path(session_id, "prepare")
    return Call(
        "POST",
        url,
        model_of(SessionPrepared),
        json={},
        params=body_of(encode=encode),
        timeout=COMPACTION_TIMEOUT_SECONDS,
    )
