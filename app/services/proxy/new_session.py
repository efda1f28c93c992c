"""The session a proxied history gets when it continues none (spec §21.1, §21.3)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from app.api.schemas.sessions import SessionCreate
from app.core.errors import InvalidInput
from app.services.proxy.contract import ProxyRequest

__all__ = ["DEFAULT_SYSTEM_PROMPT", "session_spec"]

# A session's System Context is never empty (spec §0, §15.1): a request without a system prompt
# gets this one, the line the SDKs' own examples use (spec §21.3 lists it as a change).
DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."


def session_spec(
    request: ProxyRequest, model_id: str, summary_model_id: str | None
) -> SessionCreate:
    """The new session's spec: the caller's system prompt and tools, no workspace, no control
    tool; ``InvalidInput`` (``invalid_request``) when they break a rule of sessions."""
    spec: dict[str, Any] = {
        "title": None,
        "model_id": model_id,
        "summary_model_id": summary_model_id,
        "agent": {
            "system_prompt": request.system or DEFAULT_SYSTEM_PROMPT,
            "tools": [
                {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "input_schema": t["input_schema"],
                }
                for t in request.tools
            ],
            "max_model_calls": 20,
            "doom_loop_threshold": 3,
            # The caller runs its own tools and knows none of ours, and there is no
            # workspace: no control tools, no World State sections of a workspace.
            "preset": "general",
            "context_sections": {},
            "control_tools": [],
        },
        "workspace": None,
        "sandbox": {"mode": "auto", "available": False},
        "disabled_skills": [],
    }
    try:
        return SessionCreate.model_validate(spec)
    except ValidationError as refused:
        # The caller's tools or system prompt break a rule of sessions (spec §15.1).
        problem = refused.errors()[0]
        where = ".".join(str(p) for p in problem["loc"])
        raise InvalidInput("invalid_request", f"{where}: {problem['msg']}") from None
