"""The operations of turns, live updates, agent messages and compaction as ``Call``s."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Literal

from ctxsvc_client._callkit import (
    COMPACTION_TIMEOUT_SECONDS,
    Encode,
    body_of,
    model_of,
    session_path,
    wait_param,
)
from ctxsvc_client._calls import Call
from ctxsvc_client._inputs import InputBlock, ToolResultIn
from ctxsvc_client._inputs import input_blocks as _input_blocks
from ctxsvc_client._models import (
    AgentMessageReceipt,
    Checkpoint,
    CheckpointPage,
    ReloadResult,
    Replay,
    SummaryRequest,
    ToolResultsAnswer,
    Transcript,
    Turn,
    TurnPage,
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
    url = session_path(session_id, "turns")
    return Call("POST", url, model_of(Turn), json=body, params=wait_param(wait), idempotent=True)


def get_turn(session_id: str, turn_id: str, *, wait: bool = False) -> Call[Turn]:
    """A turn; with ``wait`` the answer comes when it is terminal or waits for tool results."""
    url = session_path(session_id, "turns", turn_id)
    return Call("GET", url, model_of(Turn), params=wait_param(wait), idempotent=True)


def list_turns(
    session_id: str, *, limit: int | None = None, cursor: str | None = None
) -> Call[TurnPage]:
    """The session's turns, newest first; pass ``next_cursor`` for the next page."""
    params = body_of(limit=limit, cursor=cursor)
    url = session_path(session_id, "turns")
    return Call("GET", url, model_of(TurnPage), params=params, idempotent=True)


def post_tool_results(
    session_id: str, turn_id: str, results: Sequence[ToolResultIn], *, wait: bool = False
) -> Call[ToolResultsAnswer]:
    """Results of your tool calls; the turn goes on once every pending call has one."""
    url = session_path(session_id, "turns", turn_id, "tool-results")
    body = {"results": list(results)}
    return Call("POST", url, model_of(ToolResultsAnswer), json=body, params=wait_param(wait))


def cancel_turn(session_id: str, turn_id: str) -> Call[Turn]:
    """Cancel a running turn; answers once it is terminal."""
    return Call(
        "POST", session_path(session_id, "turns", turn_id, "cancel"), model_of(Turn), json={}
    )


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
    url = session_path(session_id, "agent-messages")
    return Call("POST", url, model_of(AgentMessageReceipt), json=payload, idempotent=True)


# ----- compaction ----------------------------------------------------------------------------


def compact(
    session_id: str,
    *,
    summary: str | None = None,
    model: str | None = None,
    expected_through_message_sequence: int | None = None,
    through_message_sequence: int | None = None,
    allow_larger: bool | None = None,
    accept_dropped_user_facts: bool | None = None,
) -> Call[Checkpoint]:
    """Compact now with the session's summary model, or install your own model's ``summary``
    over what its request covered (``through_message_sequence`` of ``get_summary_request``).
    ``allow_larger`` installs a checkpoint that does not shrink the conversation (409
    ``compaction_not_smaller`` otherwise); ``accept_dropped_user_facts`` installs a ``summary``
    that drops the user's facts of the checkpoint it replaces (422
    ``summary_drops_user_facts`` otherwise)."""
    body = body_of(
        summary=summary,
        model=model,
        expected_through_message_sequence=expected_through_message_sequence,
        through_message_sequence=through_message_sequence,
        allow_larger=allow_larger,
        accept_dropped_user_facts=accept_dropped_user_facts,
    )
    url = session_path(session_id, "compactions")
    return Call("POST", url, model_of(Checkpoint), json=body, timeout=COMPACTION_TIMEOUT_SECONDS)


def get_summary_request(session_id: str, *, encode: Encode | None = None) -> Call[SummaryRequest]:
    """The exact summary request your own model should answer."""
    url = session_path(session_id, "compactions", "request")
    return Call(
        "GET", url, model_of(SummaryRequest), params=body_of(encode=encode), idempotent=True
    )


def list_compactions(
    session_id: str, *, limit: int | None = None, before_sequence: int | None = None
) -> Call[CheckpointPage]:
    """Checkpoints, newest first (without summary and reminder)."""
    params = body_of(limit=limit, before_sequence=before_sequence)
    url = session_path(session_id, "compactions")
    return Call("GET", url, model_of(CheckpointPage), params=params, idempotent=True)


def get_compaction(session_id: str, compaction_id: str) -> Call[Checkpoint]:
    """One checkpoint: summary, reminder, boundaries, token figures."""
    url = session_path(session_id, "compactions", compaction_id)
    return Call("GET", url, model_of(Checkpoint), idempotent=True)


def rewind(session_id: str, compaction_id: str) -> Call[Checkpoint]:
    """Reinstall an earlier checkpoint as a new ``rewind`` checkpoint (nothing is deleted)."""
    body = {"compaction_id": compaction_id}
    return Call("POST", session_path(session_id, "rewind"), model_of(Checkpoint), json=body)


def replay(session_id: str, selector: str = "latest") -> Call[Replay]:
    """A projection, read-only: ``latest``, ``compaction:{id}`` or ``through_message:{n}``."""
    url = session_path(session_id, "replay")
    return Call("GET", url, model_of(Replay), params={"selector": selector}, idempotent=True)


def transcript(
    session_id: str,
    *,
    compaction_id: str | None = None,
    after_sequence: int = 0,
    limit: int | None = None,
) -> Call[Transcript]:
    """The raw messages a checkpoint covers, a page at a time."""
    params = body_of(compaction_id=compaction_id, after_sequence=after_sequence, limit=limit)
    url = session_path(session_id, "transcript")
    return Call("GET", url, model_of(Transcript), params=params, idempotent=True)


def reload_session(session_id: str) -> Call[ReloadResult]:
    """Rebuild a session flagged ``reload_required`` from the database."""
    return Call("POST", session_path(session_id, "reload"), model_of(ReloadResult), json={})


def events_url(session_id: str) -> str:
    return session_path(session_id, "events")
