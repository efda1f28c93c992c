"""The one-line summary of every operation, as Swagger UI and ReDoc list them.

FastAPI makes a summary from the function's name ("Prepare Stateless", "Healthz"); these are
written for a reader scanning the operation list instead. One table rather than a ``summary=`` in
every decorator, so the list reads as a whole; ``tests/test_openapi.py`` checks every operation has
one here and that none is the generated title-case.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final

__all__ = ["SUMMARIES"]

_S = "/v1/sessions/{session_id}"

SUMMARIES: Final = MappingProxyType(
    {
        ("GET", "/healthz"): "Liveness: the process answers",
        ("GET", "/readyz"): "Readiness: the database (and, if asked, the providers)",
        ("GET", "/metrics"): "Prometheus metrics",
        ("POST", "/v1/prepare"): "Prepare a model request from the body alone (no session)",
        ("GET", "/v1/models"): "List the models (built-in and registered)",
        ("GET", "/v1/models/{model_id}"): "Read one model and whether it can be called",
        ("PUT", "/v1/models/{model_id}"): "Register or replace a model",
        ("DELETE", "/v1/models/{model_id}"): "Remove a registered model",
        ("POST", "/v1/admin/keys"): "Make an API key for a tenant (admin)",
        ("GET", "/v1/admin/keys"): "List the API keys (admin)",
        ("DELETE", "/v1/admin/keys/{key_id}"): "Revoke an API key (admin)",
        ("POST", "/v1/admin/keys/{key_id}/rotate"): "Rotate an API key (admin)",
        ("PUT", "/v1/admin/models/{model_id}"): "Register or replace a shared model (admin)",
        ("DELETE", "/v1/admin/models/{model_id}"): "Remove a shared model (admin)",
        ("POST", "/v1/sessions"): "Create a session",
        ("GET", "/v1/sessions"): "List sessions",
        ("GET", _S): "Read a session",
        ("PATCH", _S): "Change a session's title, model, sandbox or workspace",
        ("POST", f"{_S}/messages"): "Append messages to the conversation",
        ("GET", f"{_S}/messages"): "List the conversation's messages",
        ("GET", f"{_S}/context"): "Preview the next request (read-only)",
        ("POST", f"{_S}/prepare"): "Sample the workspace, then prepare the next request",
        ("POST", f"{_S}/items"): "Append Responses items to the conversation",
        ("POST", f"{_S}/items/pop"): "Take back the conversation's last item",
        ("POST", f"{_S}/epochs"): "Start a new epoch: an empty conversation, nothing deleted",
        ("POST", "/v1/tokens/count"): "Count tokens with a named counter",
        ("POST", f"{_S}/compactions"): "Compact now: summarize, or install your own summary",
        ("GET", f"{_S}/compactions"): "List the checkpoints",
        (
            "GET",
            f"{_S}/compactions/request",
        ): "Get the summary request your own model should answer",
        ("GET", f"{_S}/compactions/{{compaction_id}}"): "Read one checkpoint",
        ("POST", f"{_S}/rewind"): "Rewind to an earlier checkpoint",
        ("GET", f"{_S}/replay"): "Rebuild a past projection (read-only)",
        ("GET", f"{_S}/transcript"): "Read the raw messages a checkpoint covers",
        ("POST", f"{_S}/reload"): "Rebuild the session from the database",
        ("POST", f"{_S}/turns"): "Start a turn: the service calls the model",
        ("GET", f"{_S}/turns"): "List the session's turns",
        ("GET", f"{_S}/turns/{{turn_id}}"): "Read one turn",
        ("POST", f"{_S}/turns/{{turn_id}}/tool-results"): "Send the results of a turn's tool calls",
        ("POST", f"{_S}/turns/{{turn_id}}/cancel"): "Cancel a running turn",
        ("GET", f"{_S}/events"): "Follow the session's events (Server-Sent Events)",
        ("POST", f"{_S}/agent-messages"): "Queue a message from another agent",
        ("GET", f"{_S}/pins"): "List the session's pins",
        ("POST", f"{_S}/pins"): "Pin a fact, constraint or decision",
        ("GET", f"{_S}/pins/proposals"): "List the proposed pins",
        ("POST", f"{_S}/pins/proposals/{{proposal_id}}/accept"): "Accept a proposed pin",
        ("POST", f"{_S}/pins/proposals/{{proposal_id}}/dismiss"): "Dismiss a proposed pin",
        ("GET", f"{_S}/pins/{{pin_id}}"): "Read one pin",
        ("PUT", f"{_S}/pins/{{pin_id}}"): "Replace a pin's kind and text",
        ("DELETE", f"{_S}/pins/{{pin_id}}"): "Remove a pin",
    }
)
