"""Which problems each operation can answer with: the statuses, and the ``code`` values of each.

Every error is one shared ``Problem`` schema (``application/problem+json``, rendered by
``app.api.problems``); each operation documents only the statuses it can return, each status
with its ``code`` values as an enum, so a client can switch on them. ``problems(...)`` builds an
operation's ``responses`` from the groups below; the request-level checks every operation goes
through (NUL in the path or query, the API key, a JSON body) are added by ``secured`` and
``body``. ``tests/test_openapi_codes.py`` checks every documented code is one the code raises and
every raised code is documented; the schemathesis run checks live answers against the enums.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from app.api.problem_examples import problem_example

__all__ = [
    "COMPACTION",
    "MODEL",
    "NAMED_MODEL",
    "PIPELINE",
    "PROBLEM_REF",
    "SEQUENCES",
    "SESSION",
    "SESSION_CONFIG",
    "SESSION_MODELS",
    "TOKENIZER",
    "WORKSPACE",
    "WORLD_STATE",
    "Codes",
    "problems",
]

Codes = dict[int, tuple[str, ...]]

PROBLEM_REF = "#/components/schemas/Problem"

# Every request: text no store can keep (U+0000 in the path or query) and parameters that do not
# match their schema.
_REQUEST: Codes = {422: ("invalid_request",)}
# The key, and the calling tenant's rate limit (``app.api.auth``).
_SECURED: Codes = {401: ("unauthorized",), 429: ("tenant_rate_limited",)}
# Every /v1 operation reads or writes the database: an outage answers 503 with Retry-After
# (``app.storage.outages``).
_DATABASE: Codes = {503: ("database_unavailable",)}
_BODY: Codes = {
    400: ("malformed_json",),
    413: ("request_too_large",),
    415: ("unsupported_media_type",),
    422: ("invalid_request",),
}

SESSION: Codes = {404: ("session_not_found",)}
# What reads the session's stored configuration (agent, workspace, sandbox, disabled skills):
# a row this version's API never writes (``app.services.session_config``).
SESSION_CONFIG: Codes = {409: ("session_config_invalid",)}
# What writes a session's messages or events: its counters behind its rows
# (``app.storage.collisions``; ``POST …/reload`` repairs them).
SEQUENCES: Codes = {409: ("sequence_conflict",)}
MODEL: Codes = {404: ("model_not_found",)}
# A model id in a request body that names nothing: the request is wrong (422), the code naming
# the field (a missing path resource is the 404).
NAMED_MODEL: Codes = {422: ("unknown_model_id",)}
SESSION_MODELS: Codes = {422: ("unknown_model_id", "unknown_summary_model_id")}
# Exact counters whose encoding files are missing or corrupt (a deployment problem).
TOKENIZER: Codes = {503: ("tokenizer_data_missing", "tokenizer_data_invalid")}
# The prepare pipeline (spec §2-3) over what a session stores or a body carries.
PIPELINE: Codes = {
    422: (
        "invalid_capabilities",
        "empty_system_context_key",
        "empty_system_context_part",
        "duplicate_system_context_key",
        "system_context_part_too_large",
        "system_message_in_conversation",
        "data_blocks_not_accepted",
    ),
    **TOKENIZER,
}
# Sampling the World State (spec §4).
WORLD_STATE: Codes = {
    422: ("user_project_context_error", "project_instruction_error", "skill_catalog_error")
}
# A workspace given at session creation or in a patch.
WORKSPACE: Codes = {
    422: (
        "workspace_not_allowed",
        "workspace_not_found",
        "user_project_context_error",
        "project_instruction_error",
        "skill_catalog_error",
    )
}
# Summarizing and installing a checkpoint (spec §7).
COMPACTION: Codes = {
    409: (
        "session_active",
        "reload_required",
        "missing_last_user",
        "empty_conversation",
        "compaction_conflict",
    ),
    413: ("summary_input_overflow",),
    422: ("compaction_error",),
    502: ("summary_model_error", "summary_retries_exhausted"),
    503: ("persistence_error",),
}


def _merge(groups: tuple[Codes, ...]) -> Codes:
    merged: dict[int, list[str]] = {}
    for group in groups:
        for status, codes in group.items():
            known = merged.setdefault(status, [])
            known.extend(code for code in codes if code not in known)
    return {status: tuple(merged[status]) for status in sorted(merged)}


def problems(*groups: Codes, secured: bool = True, body: bool = False) -> dict[int | str, Any]:
    """The ``responses`` of an operation that can fail with ``groups`` (plus the request-level
    problems: always ``invalid_request``; ``unauthorized`` and ``database_unavailable`` when
    ``secured``; the JSON body's problems when it takes a ``body``)."""
    extra = (
        _REQUEST,
        *((_SECURED, _DATABASE) if secured else ()),
        *((_BODY,) if body else ()),
    )
    return {
        status: {
            "description": HTTPStatus(status).phrase,
            "content": {
                "application/problem+json": {
                    "schema": {
                        "allOf": [{"$ref": PROBLEM_REF}],
                        "properties": {
                            "status": {"const": status},
                            "code": {"enum": list(codes)},
                        },
                    },
                    "example": problem_example(status, codes),
                }
            },
        }
        for status, codes in _merge((*groups, *extra)).items()
    }
