"""Schemathesis hooks for the contract run (loaded with ``SCHEMATHESIS_HOOKS``).

Three checks replace schemathesis' own, each the same check with one documented exception:

- ``schema_valid_requests_are_accepted`` replaces ``positive_data_acceptance``: a request the
  schema allows is accepted, or refused only for a documented rule JSON Schema cannot state
  (``UNSTATABLE``: arithmetic across fields, order or uniqueness across array items, token
  counts, the server's configuration, stored state). ``docs/api-notes.md`` ("What the schema
  cannot state") lists the same rules with their reasons; a test keeps the two lists equal.
- ``schema_violating_requests_are_refused`` replaces ``negative_data_rejection``: the stateful
  phase replaces a negative case's body with one built from an earlier response (a link) and
  still labels the case negative (schemathesis 4.32.5); a request whose only negative part is
  its body, and whose body as sent the schema allows, violates nothing.
- ``deleted_resources_are_gone`` replaces ``use_after_free``: deleting a registered model that
  overrides a built-in one brings the built-in back under its id (``builtin: true``).
"""

from __future__ import annotations

import json
from typing import Any

import schemathesis
from jsonschema import Draft202012Validator
from schemathesis.specs.openapi.checks import (
    is_unexpected_http_status_case,
    negative_data_rejection,
    use_after_free,
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
    "POST /v1/prepare": _PIPELINE | {"invalid_request_digest", "unknown_model_id"},
    "POST /v1/tokens/count": _PIPELINE | {"unknown_model_id"},  # the registered models
    "PUT /v1/models/{model_id}": {
        "invalid_capabilities",
        "invalid_base_url",  # a port in range, an IPv6 literal: parsed as urllib and aiohttp do
        "base_url_not_allowed",  # link-local and metadata addresses (app.providers.destinations)
    },
    "PUT /v1/admin/models/{model_id}": {
        "invalid_capabilities",
        "invalid_base_url",
        "base_url_not_allowed",
    },
    "POST /v1/sessions": _WORKSPACE
    | {
        "duplicate_tool_name",
        "unresolvable_schema_ref",  # a $ref that resolves to nothing: not a JSON Schema rule
    },
    "PATCH /v1/sessions/{session_id}": _WORKSPACE,
    "POST /v1/sessions/{session_id}/messages": {
        "invalid_block_order",  # the order of blocks in an array
        "duplicate_tool_result",  # unique call ids across array items
        "unknown_tool_call",  # the session's calls waiting for a result (stored state)
        "message_too_large",  # bytes of a whole message, or tokens of the session's model
    },
    "POST /v1/sessions/{session_id}/items": {
        "duplicate_tool_result",  # unique call ids across array items
        "unknown_tool_call",  # the session's calls waiting for a result (stored state)
        "message_too_large",  # bytes of a whole message, or tokens of the session's model
    },
    "GET /v1/sessions/{session_id}/context": _PIPELINE,
    "POST /v1/sessions/{session_id}/prepare": _PIPELINE | _WORLD_STATE,
    "GET /v1/sessions/{session_id}/compactions/request": _PIPELINE,
    "POST /v1/sessions/{session_id}/compactions": _PIPELINE
    | {
        "invalid_summary",  # the summary grammar of spec §7.4
        "coverage_mismatch",  # two fields that must be equal
        "coverage_out_of_range",  # the session's messages (stored state)
        "summary_drops_user_facts",  # the previous checkpoint's summary (stored state)
    },
    "POST /v1/sessions/{session_id}/turns": {
        "client_request_id_reused",  # the turns accepted before (stored state)
        "message_too_large",  # the input's tokens for the session's model
        "skill_unavailable",  # the session's skills (stored state)
        "skill_too_large",  # a token count
    },
    "POST /v1/sessions/{session_id}/turns/{turn_id}/tool-results": {
        "duplicate_tool_result",  # unique call ids across array items
        "unknown_tool_call",  # the turn's pending calls (stored state)
        "message_too_large",  # the UTF-8 bytes of the whole result
    },
    "POST /v1/sessions/{session_id}/agent-messages": {"agent_message_too_large"},  # tokens
    # The session's checkpoints (stored state), and the kind of the one named.
    "POST /v1/sessions/{session_id}/rewind": {"invalid_rewind", "unknown_compaction_id"},
    "GET /v1/sessions/{session_id}/replay": {"unknown_compaction_id"},
    "GET /v1/sessions/{session_id}/transcript": {"unknown_compaction_id"},
    # A size in UTF-8 bytes; the control tags a pin may not hold, in any case.
    "POST /v1/sessions/{session_id}/pins": {"pin_too_large", "invalid_pin_text"},
    "PUT /v1/sessions/{session_id}/pins/{pin_id}": {"pin_too_large", "invalid_pin_text"},
}

_ACCEPTED = {401, 403, 404, 409, 429}
_SESSION_BODIES = {"/v1/sessions", "/v1/sessions/{session_id}"}
_OFFLINE = {"local"}


# A shared model overrides the catalogue for every tenant, as a registered one does for its own.
_MODEL_PATHS = frozenset({"/v1/models/{model_id}", "/v1/admin/models/{model_id}"})


@schemathesis.hook
def before_call(
    ctx: schemathesis.HookContext, case: schemathesis.Case, kwargs: dict[str, Any]
) -> None:
    """Sessions run on the offline ``local`` model: a session on a catalogue model (gpt-5 ...) or
    one registered during the run would call a provider over the network in turns and
    compactions. Any non-empty model id is valid for the schema, so nothing negative turns
    positive; a model id in a path stays valid too. (The server also runs behind a dead proxy:
    nothing could leave the machine.)"""
    if case.operation.path in _MODEL_PATHS and case.path_parameters:
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


def _body_as_sent_is_valid(case: schemathesis.Case, response: schemathesis.Response) -> bool:
    """Whether the case's only negative part is its body, and the body sent is one the
    operation's schema allows."""
    meta = case.meta
    if meta is None or case.operation.definition.raw.get("requestBody") is None:
        return False
    if any(c.mode.is_negative for where, c in meta.components.items() if where.name != "BODY"):
        return False
    try:
        sent = json.loads(response.request.body or b"")
    except (TypeError, ValueError):
        return False
    raw = case.operation.schema.raw_schema
    body = case.operation.definition.raw["requestBody"]["content"]["application/json"]["schema"]
    validator = Draft202012Validator({**body, "components": raw["components"]})
    return bool(validator.is_valid(sent))


@schemathesis.check
def schema_violating_requests_are_refused(
    ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case
) -> bool | None:
    if _body_as_sent_is_valid(case, response):
        return None
    return negative_data_rejection(ctx, response, case)


@schemathesis.check
def deleted_resources_are_gone(
    ctx: schemathesis.CheckContext, response: schemathesis.Response, case: schemathesis.Case
) -> bool | None:
    if case.operation.path == "/v1/models/{model_id}" and response.status_code == 200:
        try:
            if json.loads(response.content).get("builtin") is True:
                return None  # the catalogue entry the deleted registration overrode
        except ValueError:
            pass
    return use_after_free(ctx, response, case)


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
