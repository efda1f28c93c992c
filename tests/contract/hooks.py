"""Schemathesis hooks for the contract run (loaded with ``SCHEMATHESIS_HOOKS``).

Two checks replace schemathesis' own. ``schema_valid_requests_are_accepted`` replaces
``positive_data_acceptance``: a request the schema allows is accepted, or refused only for a
documented rule JSON Schema cannot state (``UNSTATABLE``: arithmetic across fields, order or
uniqueness across array items, token counts, the server's configuration, stored state).
``docs/api-notes.md`` ("What the schema cannot state") lists the same rules with their reasons;
a test keeps the two lists equal. ``created_sessions_are_available`` replaces
``ensure_resource_availability``, reading what a 404 says is missing.
"""

from __future__ import annotations

import json
from typing import Any

import schemathesis
from schemathesis.specs.openapi.checks import (
    ensure_resource_availability,
    is_unexpected_http_status_case,
)

# operation label → the problem codes of rules no JSON Schema can state.
_PIPELINE = {
    "invalid_capabilities",  # reserves must leave input room: arithmetic across fields
    "duplicate_system_context_key",  # unique keys across array items
    "system_context_part_too_large",  # a token count
    "data_blocks_not_accepted",  # depends on the model's capability (another field or a model)
}
_WORLD_STATE = {
    "user_project_context_error",  # the rendered project context's length
    "project_instruction_error",  # AGENTS.md size in UTF-8 bytes
    "skill_catalog_error",  # unique skill names; a body's size in UTF-8 bytes
}
_WORKSPACE = _WORLD_STATE | {
    "workspace_not_allowed",  # the server's CTXSVC_WORKSPACE_ROOTS
    "workspace_not_found",  # the server's filesystem
}
UNSTATABLE: dict[str, set[str]] = {
    # The record inside a digest: the schema states only its text form.
    "POST /v1/prepare": _PIPELINE | {"invalid_request_digest"},
    "POST /v1/tokens/count": _PIPELINE,
    "PUT /v1/models/{model_id}": {
        "invalid_capabilities",
        "invalid_base_url",  # a port in range, an IPv6 literal: parsed as urllib and aiohttp do
    },
    "POST /v1/sessions": _WORKSPACE
    | {
        "duplicate_tool_name",
        "unresolvable_schema_ref",  # a $ref that resolves to nothing: not a JSON Schema rule
    },
    "PATCH /v1/sessions/{session_id}": _WORKSPACE,
    "POST /v1/sessions/{session_id}/messages": {
        "invalid_block_order",  # the order of blocks in an array
    },
    "GET /v1/sessions/{session_id}/context": _PIPELINE,
    "POST /v1/sessions/{session_id}/prepare": _PIPELINE | _WORLD_STATE,
    "GET /v1/sessions/{session_id}/compactions/request": _PIPELINE,
    "POST /v1/sessions/{session_id}/compactions": _PIPELINE
    | {
        "invalid_summary",  # the summary grammar of SPEC §7.4
        "coverage_mismatch",  # two fields that must be equal
        "coverage_out_of_range",  # the session's messages (stored state)
    },
    "POST /v1/sessions/{session_id}/turns": {
        "skill_unavailable",  # the session's skills (stored state)
        "skill_too_large",  # a token count
    },
    "POST /v1/sessions/{session_id}/turns/{turn_id}/tool-results": {
        "duplicate_tool_result",  # unique call ids across array items
        "unknown_tool_call",  # the turn's pending calls (stored state)
    },
    "POST /v1/sessions/{session_id}/agent-messages": {"agent_message_too_large"},  # tokens
    "POST /v1/sessions/{session_id}/rewind": {"invalid_rewind"},  # the checkpoint's kind
    # A size in UTF-8 bytes; the control tags a pin may not hold, in any case.
    "POST /v1/sessions/{session_id}/pins": {"pin_too_large", "invalid_pin_text"},
    "PUT /v1/sessions/{session_id}/pins/{pin_id}": {"pin_too_large", "invalid_pin_text"},
}

_ACCEPTED = {401, 403, 404, 409, 429}
_SESSION_BODIES = {"/v1/sessions", "/v1/sessions/{session_id}"}
_OFFLINE = {"local"}


@schemathesis.hook
def before_call(
    ctx: schemathesis.HookContext, case: schemathesis.Case, kwargs: dict[str, Any]
) -> None:
    """Sessions run on the offline ``local`` model: a session on a catalogue model (gpt-5 ...) or
    one registered during the run would call a provider over the network in turns and
    compactions. Any non-empty model id is valid for the schema, so nothing negative turns
    positive; a model id in a path stays valid too. (The server also runs behind a dead proxy:
    nothing could leave the machine.)"""
    if case.operation.path == "/v1/models/{model_id}" and case.path_parameters:
        # Registering a model named ``local`` would override the offline built-in itself.
        if case.path_parameters.get("model_id") in _OFFLINE:
            case.path_parameters["model_id"] = "contract-run-model"
        return
    if case.operation.path not in _SESSION_BODIES or not isinstance(case.body, dict):
        return
    for key in ("model_id", "summary_model_id"):
        if isinstance(case.body.get(key), str) and case.body[key]:
            case.body[key] = "local"


def _problem_code(response: schemathesis.Response) -> str | None:
    try:
        problem = json.loads(response.content)
    except ValueError:
        return None
    code = problem.get("code") if isinstance(problem, dict) else None
    return code if isinstance(code, str) else None


@schemathesis.check
def created_sessions_are_available(
    ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case
) -> bool | None:
    """schemathesis' ``ensure_resource_availability`` (a resource just created answers 404 in the
    operation that follows it), except for a 404 that names another resource than the session:
    a rewind to a checkpoint id that names nothing (``compaction_not_found``), a cancel of a turn
    id that names nothing (``turn_not_found``). Those say nothing about the session, which the
    built-in check takes them for (its per-operation switch does not reach the stateful phase).
    """
    if response.status_code == 404 and _problem_code(response) != "session_not_found":
        return None
    return ensure_resource_availability(ctx, response, case)


def _positive(case: schemathesis.Case) -> bool:
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return False
    # The coverage phase can pair a boundary value of one parameter with a negative body and
    # still label the case positive: only a case positive in every part counts.
    return all(info.mode.is_positive for info in meta.components.values())


@schemathesis.check
def schema_valid_requests_are_accepted(
    ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case
) -> bool | None:
    if not _positive(case) or is_unexpected_http_status_case(case):
        return None
    status = response.status_code
    if status < 400 or status in _ACCEPTED or status >= 500:  # 5xx: not_a_server_error's
        return None
    code = _problem_code(response)
    if status == 422 and code in UNSTATABLE.get(case.operation.label, set()):
        return None
    raise AssertionError(f"A request the schema allows was refused: {status}: {response.text}")
