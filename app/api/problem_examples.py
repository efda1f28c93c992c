"""An example problem per error status of each operation, for Swagger UI and ReDoc.

Without one, both pages made up a sample from the ``Problem`` schema alone, and every 4xx/5xx
showed the same ``404 session_not_found`` (even a 401). Each status now carries a real answer:
its first documented ``code`` and the kind of sentence the service writes for it (the texts are
paraphrases of the code's own messages, with made-up ids).
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

__all__ = ["problem_example"]

_SID = "ses-3f9c2a7e5b1d4c6e8a0f2b4d6c8e0a1b"

# What the service says for each code an operation lists first under its status.
_DETAILS: dict[str, str] = {
    "malformed_json": "The request body is not valid JSON: Expecting ',' delimiter at line 1, "
    "column 42.",
    "unauthorized": "missing or invalid API key: send `Authorization: Bearer <key>`",
    "session_not_found": f"no session with id {_SID!r}; create it first",
    "model_not_found": "no model 'house-llama'; GET /v1/models lists them, PUT /v1/models/{id} "
    "registers one",
    "compaction_not_found": "no compaction cmp_01JD7R0 in this session",
    "turn_not_found": "no turn trn_01JD7R2 in this session",
    "pin_not_found": "no pin pin_01JD7R4 in this session",
    "pin_proposal_not_found": "no pin proposal ppr_01JD7R6 in this session",
    "builtin_model": "gpt-4o is a built-in model; register your own id instead",
    "duplicate_pin": "the session already has a pin with this text",
    "pin_proposal_not_open": "the pin proposal was already accepted or dismissed",
    "sequence_conflict": "the session's counters are behind its rows; POST /v1/sessions/"
    f"{_SID}/reload repairs them",
    "session_active": "a turn is running in this session; wait for it to end, then retry",
    "session_config_invalid": "the session's stored configuration does not read as this "
    "version's: agent.tools[0] is not an object",
    "request_too_large": "The request body exceeds 16777216 bytes (CTXSVC_MAX_BODY_BYTES); "
    "send less, or raise the limit.",
    "summary_input_overflow": "the conversation to summarize (212 400 tokens) does not fit the "
    "summary model's input (128 000 tokens)",
    "unsupported_media_type": "The request body must be JSON, sent with `Content-Type: "
    "application/json`; this one is declared as text/plain.",
    "invalid_request": "body.messages.0.role: Input should be 'user', 'assistant' or 'tool'",
    "agent_message_too_large": "the agent message holds 70 000 characters; at most 65 536",
    "invalid_after_sequence": "after_sequence must be a whole number ≥ 0; got -3",
    "invalid_capabilities": "max_output_tokens (200 000) leaves no input room in "
    "context_window_tokens (128 000)",
    "invalid_cursor": "the cursor does not come from this list; start again without one",
    "invalid_last_event_id": "Last-Event-ID must be an event sequence number; got 'abc'",
    "invalid_selector": "select either message sequences or a range, not both",
    "message_too_large": "message 3 holds 1 200 000 characters of text; at most 1 048 576",
    "no_tool_results": "the turn waits for results of 2 tool calls and the body carries none",
    "pin_too_large": "the pin holds 9 000 characters; at most 4 000",
    "unknown_compaction_id": "compaction_id cmp_01JD7R0 names no compaction of this session",
    "unknown_model_id": "model_id 'house-llama' names no model; GET /v1/models lists them",
    "user_project_context_error": "CLAUDE.md in the workspace is not UTF-8 text",
    "summary_model_error": "the summary model failed: the connection to the provider at "
    "http://127.0.0.1:11434/v1/chat/completions failed: connection refused (ClientConnectorError)",
    "not_ready": "the database is unreachable or not migrated to the latest schema; run "
    "`ctxsvc migrate`",
    "database_unavailable": "the database cannot be reached; the request was not completed; "
    "retry later",
    "persistence_error": "the database did not accept the write; retry",
    "reload_failed": "the session could not be reloaded from the database; retry",
    "shutting_down": "the service is shutting down; retry on another replica",
    "tenant_rate_limited": "this tenant made more than 600 requests in 60 s; retry after 4 s",
    "admin_scope_required": "this operation needs a key with the admin scope (a key of "
    "CTXSVC_API_KEYS, or one made with scope admin)",
    "key_not_found": "no API key 'key_01JD7R8'; GET /v1/admin/keys lists them",
    "base_url_not_allowed": "base_url http://169.254.169.254/v1 is a link-local or metadata "
    "address; ctxsvc never calls those",
    "compaction_not_smaller": "the compaction would not shrink the conversation (97 tokens "
    "before, 398 after); send allow_larger: true to install it anyway",
    "summary_drops_user_facts": "the summary drops what the user said in the summary it "
    "replaces: identifiers INC-42; send accept_dropped_user_facts: true to install it anyway",
    "tokenizer_data_missing": "no data for o200k_base: "
    "app/providers/tokenizers/data/o200k_base.tiktoken holds it no longer (reinstall ctxsvc)",
    # The drop-in endpoints' refusals (``app.api.compat``), in the wording of their codecs.
    "invalid_model": "model must be a non-empty string",
    "invalid_messages": "messages[2].content[0]: a tool_use needs an id and a name",
    "invalid_input": "input must be a string or a non-empty list of items",
    "invalid_system": "system[1] is not a text block",
    "invalid_tools": "tool 0 (lookup): its schema must be an object",
    "invalid_max_tokens": "max_tokens must be a whole number of tokens ≥ 1; got 0",
    "unsupported_block": "messages[1].content[0] is a 'server_tool_use' block, which this "
    "endpoint cannot hold; it takes text, thinking and tool_use",
    "unsupported_tool": "tool 0 is of type 'web_search', a tool that runs at the provider; this "
    "endpoint takes function tools",
    "previous_response_id_unsupported": "previous_response_id asks the provider for a "
    "conversation it stored; this endpoint keeps the conversation itself from what each request "
    "sends: send the whole history in input (store: false) and leave previous_response_id out",
}


def problem_example(status: int, codes: tuple[str, ...]) -> dict[str, Any]:
    """The problem+json body of ``status`` for the first of ``codes`` that has a sentence."""
    code = next((c for c in codes if c in _DETAILS), codes[0])
    phrase = HTTPStatus(status).phrase
    return {
        "type": f"https://ctxsvc.dev/problems/{code}",
        "title": phrase,
        "status": status,
        "detail": _DETAILS.get(code, f"{phrase}: see `code` ({code})"),
        "code": code,
    }
