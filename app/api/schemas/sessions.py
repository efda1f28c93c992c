"""Sessions and their messages (spec §15)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from app.api.schemas.content import StoredContentIn
from app.api.schemas.fields import (
    DoomLoopThreshold,
    Flag,
    ModelCalls,
    RequestModel,
    ToolResultsTimeout,
)
from app.api.schemas.prepare import ToolDefinitionIn
from app.api.schemas.shapes import NOT_BLANK, AppendedMessageShape, DocumentedAs, OneOf
from app.core.world_state.provided import MAX_SKILL_PATH_CHARS, MAX_SKILLS

__all__ = [
    "AgentIn",
    "AppendBody",
    "AppendResponse",
    "AppendedMessage",
    "ContextSectionsIn",
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


# The service's own tools (spec §6); an agent tool of the same name is refused
# (``tool_name_conflict``).
_SERVER_TOOL_NAMES = ["update_plan", "conversation_history"]


class AgentToolIn(ToolDefinitionIn):
    """A tool the caller executes; its name is unique among the agent's tools and is not one of
    the service's own (`update_plan`, `conversation_history`)."""

    name: Annotated[
        str,
        Field(min_length=1, json_schema_extra={"not": {"enum": _SERVER_TOOL_NAMES}}),
    ]
    runs_commands: Flag = Field(
        default=False,
        description="The tool runs commands (a shell, a script): a general agent with such a "
        "tool gets the sandbox policy section unless `context_sections` says otherwise. Never "
        "sent to the model.",
    )


class ContextSectionsIn(RequestModel):
    """Which World State sections the agent has (spec §4); null: the preset's choice. A
    section the agent has is shown only when there is something to show (a workspace with a
    layout, an AGENTS.md, skills)."""

    project_layout: Flag | None = Field(
        default=None, description="`runtime/user-project-context`: working directory and layout."
    )
    project_instructions: Flag | None = Field(
        default=None, description="`project/AGENTS.md`: the workspace's project instructions."
    )
    skill_catalog: Flag | None = Field(
        default=None, description="`skills/catalog`: the workspace's skills, one line each."
    )
    sandbox_policy: Flag | None = Field(
        default=None,
        description="`runtime/sandbox-policy`: what write/edit and bash may do. Preset "
        "`general`: on only when one of the agent's tools has `runs_commands`.",
    )


class AgentIn(RequestModel):
    system_prompt: str = Field(
        min_length=1,
        examples=["You are a careful coding agent."],
        # Checked by the service (``empty_system_context_part``): the schema states it.
        json_schema_extra={"pattern": NOT_BLANK},
    )
    tools: list[AgentToolIn] = Field(default_factory=list)
    max_model_calls: ModelCalls = 20
    doom_loop_threshold: DoomLoopThreshold = 3
    tool_results_timeout_seconds: ToolResultsTimeout | None = Field(
        default=None,
        description="How long a turn waits for your tool results (seconds, up to 7 days) "
        "before it ends with `tool_results_timeout`; null: the service's "
        "`CTXSVC_TOOL_RESULTS_TIMEOUT_SECONDS` (1 hour by default).",
    )
    preset: Literal["general", "coding"] = Field(
        default="general",
        description="`general`: the workspace's instructions and skills when it has them, no "
        "project layout, no sandbox policy (unless a tool `runs_commands`), no control tool. "
        "`coding`: all four World State sections and both control tools.",
    )
    context_sections: ContextSectionsIn = Field(default_factory=ContextSectionsIn)
    control_tools: list[Literal["update_plan", "conversation_history"]] | None = Field(
        default=None,
        description="The service's own tools advertised to the model (always after the "
        "agent's tools, in this order: `update_plan`, `conversation_history`); null: the "
        "preset's (none for `general`, both for `coding`).",
    )


class SandboxIn(RequestModel):
    mode: Literal["auto", "accept_edits"] = "auto"
    available: Flag = True


# The rules ``core.world_state.provided`` checks (its codes answer); the schema states them.
_SKILL_NAME = {"pattern": "^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$"}
_SKILL_PATH = {"pattern": "^[^\\u0000-\\u001f]+$", "maxLength": MAX_SKILL_PATH_CHARS}


class ProvidedSkillIn(RequestModel):
    """A skill of the caller's catalog (spec §4): names unique in the workspace."""

    name: Annotated[str, Field(min_length=1, max_length=64, json_schema_extra=_SKILL_NAME)]
    description: Annotated[str, Field(min_length=1, json_schema_extra={"pattern": NOT_BLANK})]
    path: Annotated[str, Field(min_length=1, json_schema_extra=_SKILL_PATH)]
    body: str | None = Field(
        default=None,
        description="The SKILL.md body (at most 65 536 UTF-8 bytes), so a turn can select this "
        "skill by name.",
    )


class ProvidedWorkspaceIn(RequestModel):
    """What the World State shows (spec §4); the rendered project context stays within 16 384
    characters and `agents_md` within 65 536 UTF-8 bytes."""

    working_directory: str = Field(min_length=1, examples=["/shown/path"])
    repository_root: str | None = None
    layout: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, max_length=100_000, examples=[["src/", "README.md"]]
    )
    agents_md: str | None = None
    # Up to 1 000 are read; past 100 the catalog's own rule answers (``skill_catalog_error``).
    skills: list[ProvidedSkillIn] = Field(
        default_factory=list, max_length=1000, json_schema_extra={"maxItems": MAX_SKILLS}
    )


class DirectoryWorkspaceIn(RequestModel):
    """A server directory under `CTXSVC_WORKSPACE_ROOTS` (symlinks and `..` may not leave it)."""

    working_directory: str = Field(min_length=1, examples=["/srv/workspaces/demo"])
    skills_root: str | None = None
    spill_directory: str | None = None


class ProvidedWorkspaceRootIn(RequestModel):
    """Inputs the caller provides instead of a server directory."""

    provided: ProvidedWorkspaceIn


WorkspaceIn = Annotated[DirectoryWorkspaceIn | ProvidedWorkspaceRootIn, OneOf()]


class SessionCreate(RequestModel):
    title: str | None = Field(default=None, max_length=500)
    model_id: str = Field(min_length=1, examples=["local"])
    summary_model_id: str | None = None
    agent: AgentIn
    workspace: WorkspaceIn | None = None
    sandbox: SandboxIn = Field(default_factory=SandboxIn)
    disabled_skills: list[str] = Field(default_factory=list)


class SessionPatch(RequestModel):
    title: str | None = Field(default=None, max_length=500)
    model_id: str | None = None
    summary_model_id: str | None = None
    sandbox: SandboxIn | None = None
    disabled_skills: list[str] | None = None
    workspace: WorkspaceIn | None = None


class ToolOut(BaseModel):
    name: str
    description: str
    input_schema: dict[str, Any]
    runs_commands: bool = False


class ContextSectionsOut(BaseModel):
    """The World State sections the agent has, resolved from its preset and choices."""

    project_layout: bool
    project_instructions: bool
    skill_catalog: bool
    sandbox_policy: bool


class AgentOut(BaseModel):
    system_prompt: str
    tools: list[ToolOut]
    max_model_calls: int
    doom_loop_threshold: int
    tool_results_timeout_seconds: float | None = None
    # Sessions created before agents could choose are coding agents (``agent_profile_of``).
    preset: Literal["general", "coding"] = "coding"
    context_sections: ContextSectionsOut = Field(
        default_factory=lambda: ContextSectionsOut(
            project_layout=True, project_instructions=True, skill_catalog=True, sandbox_policy=True
        )
    )
    control_tools: list[str] = Field(
        default_factory=lambda: ["update_plan", "conversation_history"]
    )


class SandboxOut(BaseModel):
    mode: Literal["auto", "accept_edits"]
    available: bool


class ProvidedSkillOut(BaseModel):
    name: str
    description: str
    path: str
    body: str | None = None


class ProvidedWorkspaceOut(BaseModel):
    working_directory: str
    repository_root: str | None = None
    layout: list[str] = Field(default_factory=list)
    agents_md: str | None = None
    skills: list[ProvidedSkillOut] = Field(default_factory=list)


class DirectoryWorkspaceOut(BaseModel):
    """The directories, resolved (symlinks followed, under an allowed root)."""

    working_directory: str
    skills_root: str | None = None
    spill_directory: str | None = None


class ProvidedWorkspaceRootOut(BaseModel):
    provided: ProvidedWorkspaceOut


class SessionUsageOut(BaseModel):
    """Σ of the token usage the providers reported for the session's model calls: its turns'
    and the calls of the compatible endpoints (spec §21) that continued it."""

    turns: int
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    cache_creation_tokens: int
    reasoning_tokens: int
    proxied_calls: int = Field(
        description="Calls of the compatible endpoints (spec §21) whose answer this session "
        "stores; no turn holds them, and their usage is in the figures above.",
    )


class SessionOut(BaseModel):
    id: str
    title: str | None
    model_id: str
    summary_model_id: str
    agent: AgentOut
    workspace: Annotated[DirectoryWorkspaceOut | ProvidedWorkspaceRootOut, OneOf()] | None
    sandbox: SandboxOut
    disabled_skills: list[str]
    tool_result_pruned_through_sequence: int | None
    message_count: int
    last_event_sequence: int = Field(
        description="Id of the session's last update: `Last-Event-ID` for only what follows."
    )
    reload_required: bool
    origin: str | None = Field(
        default=None,
        description="Who made the session: null (this API) or `proxy:<protocol>` (a compatible "
        "endpoint, spec §21: `proxy:openai_chat`, `proxy:openai_responses`, "
        "`proxy:anthropic_messages`).",
    )
    forked_from: str | None = Field(
        default=None,
        description="The proxied session this one was forked from: the caller's history "
        "differed from it (an edit, or a retry of an earlier request).",
    )
    active_history_tokens: int = Field(
        description="Estimate (bytes / 4) of the stored messages after the latest checkpoint's "
        "install boundary that the Conversation shows (not those taken back with `items/pop` "
        "or before a new epoch), before pruning and projection: which sessions are heavy. The "
        "exact figure of the next request is `GET .../context`."
    )
    usage: SessionUsageOut
    created_at: datetime
    updated_at: datetime


class SessionPage(BaseModel):
    sessions: list[SessionOut]
    next_cursor: str | None


class AppendMessageIn(RequestModel):
    # Validated loosely so that the store's rules answer with their own codes (spec §5,
    # ``chat_rules.check_append``); ``AppendBody`` publishes the per-role shapes they accept.
    role: Literal["user", "assistant", "tool", "system"]
    kind: Literal["normal", "skill_instruction", "agent_message", "world_state"] = "normal"
    content: StoredContentIn


class AppendBody(RequestModel):
    messages: Annotated[
        list[AppendMessageIn],
        Field(min_length=1, max_length=1000),
        DocumentedAs(Annotated[list[AppendedMessageShape], Field(min_length=1, max_length=1000)]),
    ]


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
