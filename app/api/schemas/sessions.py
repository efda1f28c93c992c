"""Sessions and their messages (API.md, Sessions and conversation)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.api.schemas.content import StoredContentIn
from app.api.schemas.prepare import ToolDefinitionIn

__all__ = [
    "AgentIn",
    "AppendBody",
    "AppendResponse",
    "AppendedMessage",
    "MessageOut",
    "MessagePage",
    "SandboxIn",
    "SessionCreate",
    "SessionOut",
    "SessionPage",
    "SessionPatch",
    "SessionUsageOut",
    "WorkspaceIn",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AgentIn(_Strict):
    system_prompt: str = Field(min_length=1, examples=["You are a careful coding agent."])
    tools: list[ToolDefinitionIn] = Field(default_factory=list)
    max_model_calls: int = Field(default=20, ge=1, le=1000)
    doom_loop_threshold: int = Field(default=3, ge=2, le=100)
    tool_results_timeout_seconds: float | None = Field(
        default=None,
        ge=1,
        le=604_800,
        description="How long a turn waits for your tool results (seconds, up to 7 days) "
        "before it ends with `tool_results_timeout`; null: the service's "
        "`CTXSVC_TOOL_RESULTS_TIMEOUT_SECONDS` (1 hour by default).",
    )


class SandboxIn(_Strict):
    mode: Literal["auto", "accept_edits"] = "auto"
    available: bool = True


class ProvidedSkillIn(_Strict):
    name: str = Field(min_length=1, max_length=64)
    description: str = Field(min_length=1)
    path: str = Field(min_length=1)
    body: str | None = Field(
        default=None, description="The SKILL.md body, so a turn can select this skill by name."
    )


class ProvidedWorkspaceIn(_Strict):
    working_directory: str = Field(min_length=1, examples=["/shown/path"])
    repository_root: str | None = None
    layout: list[str] = Field(default_factory=list, max_length=100_000)
    agents_md: str | None = None
    skills: list[ProvidedSkillIn] = Field(default_factory=list, max_length=1000)


class WorkspaceIn(_Strict):
    """Either a server directory under the allowed roots, or inputs the caller provides."""

    working_directory: str | None = Field(default=None, examples=["/srv/workspaces/demo"])
    skills_root: str | None = None
    spill_directory: str | None = None
    provided: ProvidedWorkspaceIn | None = None

    @model_validator(mode="after")
    def _one_source(self) -> WorkspaceIn:
        if (self.working_directory is None) == (self.provided is None):
            raise ValueError("give exactly one of `working_directory` or `provided`")
        if self.provided is not None and (self.skills_root or self.spill_directory):
            raise ValueError("`skills_root` and `spill_directory` are for server directories")
        return self


class SessionCreate(_Strict):
    title: str | None = Field(default=None, max_length=500)
    model_id: str = Field(min_length=1, examples=["local"])
    summary_model_id: str | None = None
    agent: AgentIn
    workspace: WorkspaceIn | None = None
    sandbox: SandboxIn = Field(default_factory=SandboxIn)
    disabled_skills: list[str] = Field(default_factory=list)


class SessionPatch(_Strict):
    title: str | None = Field(default=None, max_length=500)
    model_id: str | None = None
    summary_model_id: str | None = None
    sandbox: SandboxIn | None = None
    disabled_skills: list[str] | None = None
    workspace: WorkspaceIn | None = None


class SessionUsageOut(BaseModel):
    """Σ over the session's turns of the token usage the providers reported."""

    turns: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    reasoning_tokens: int


class SessionOut(BaseModel):
    id: str
    title: str | None
    model_id: str
    summary_model_id: str
    agent: dict[str, Any]
    workspace: dict[str, Any] | None
    sandbox: dict[str, Any]
    disabled_skills: list[str]
    tool_result_pruned_through_sequence: int | None
    message_count: int
    last_event_sequence: int = Field(
        description="Id of the session's last update: `Last-Event-ID` for only what follows."
    )
    reload_required: bool
    active_history_tokens: int = Field(
        description="Estimate (bytes / 4) of the stored messages after the latest checkpoint's "
        "install boundary, before pruning and projection: which sessions are heavy. The exact "
        "figure of the next request is `GET .../context`."
    )
    usage: SessionUsageOut
    created_at: datetime
    updated_at: datetime


class SessionPage(BaseModel):
    sessions: list[SessionOut]
    next_cursor: str | None


class AppendMessageIn(_Strict):
    role: Literal["user", "assistant", "tool", "system"]
    kind: Literal["normal", "skill_instruction", "agent_message", "world_state"] = "normal"
    content: StoredContentIn


class AppendBody(_Strict):
    messages: list[AppendMessageIn] = Field(min_length=1, max_length=1000)


class AppendedMessage(BaseModel):
    message_id: str
    sequence: int


class AppendResponse(BaseModel):
    messages: list[AppendedMessage]


class MessageOut(BaseModel):
    message_id: str
    sequence: int
    role: str
    kind: str
    content: list[dict[str, Any]]
    turn_id: str | None
    created_at: datetime


class MessagePage(BaseModel):
    messages: list[MessageOut]
    has_more: bool
    next_after_sequence: int | None
