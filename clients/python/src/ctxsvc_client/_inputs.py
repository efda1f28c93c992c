"""What callers send: typed dicts in the API's shapes (spec §1, §11–§19), and small builders.

Typed dicts rather than classes so that a literal ``{"type": "text", "text": "hi"}`` is valid
input and is sent exactly as written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypeAlias, TypedDict

if TYPE_CHECKING:
    from ctxsvc_client._function_tools import FunctionTool

__all__ = [
    "AgentSpec",
    "Block",
    "ContextSectionsSpec",
    "InputBlock",
    "MessageIn",
    "SandboxSpec",
    "SkillInput",
    "TextBlock",
    "TextInput",
    "ToolResultIn",
    "ToolSpec",
    "input_blocks",
    "text",
]


class TextBlock(TypedDict):
    type: Literal["text"]
    text: str


# Any content block of spec §1 (text, thinking, data, tool_call, tool_result, provider_opaque).
Block: TypeAlias = dict[str, Any]


class MessageIn(TypedDict):
    """A message to append (``POST .../messages``) or to prepare statelessly."""

    role: Literal["user", "assistant", "tool"]
    content: Sequence[Block | TextBlock]
    kind: NotRequired[Literal["normal", "skill_instruction", "agent_message", "world_state"]]
    origin: NotRequired[dict[str, Any]]  # stateless prepare only


class ToolSpec(TypedDict):
    name: str
    description: NotRequired[str]
    input_schema: NotRequired[dict[str, Any]]
    # The tool runs commands: a general agent with one gets the sandbox policy section.
    runs_commands: NotRequired[bool]


class ContextSectionsSpec(TypedDict, total=False):
    """Which World State sections the agent has; a key left out is the preset's choice."""

    project_layout: bool
    project_instructions: bool
    skill_catalog: bool
    sandbox_policy: bool


class AgentSpec(TypedDict):
    """An agent definition. ``preset``: ``general`` (the default: the workspace's
    instructions and skills, no project layout, no sandbox policy, no control tool) or
    ``coding`` (every World State section, ``update_plan`` and ``conversation_history``)."""

    system_prompt: str
    # A ``FunctionTool`` (``@function_tool``) is sent as its schema; its function runs the calls.
    tools: NotRequired[Sequence[ToolSpec | FunctionTool]]
    max_model_calls: NotRequired[int]
    doom_loop_threshold: NotRequired[int]
    tool_results_timeout_seconds: NotRequired[float | None]
    preset: NotRequired[Literal["general", "coding"]]
    context_sections: NotRequired[ContextSectionsSpec]
    control_tools: NotRequired[Sequence[Literal["update_plan", "conversation_history"]]]


class SandboxSpec(TypedDict, total=False):
    mode: Literal["auto", "accept_edits"]
    available: bool


class TextInput(TypedDict):
    type: Literal["text"]
    text: str


class SkillInput(TypedDict):
    type: Literal["skill"]
    name: str


InputBlock: TypeAlias = TextInput | SkillInput


class ToolResultIn(TypedDict):
    tool_call_id: str
    state: Literal["success", "error", "denied", "interrupted"]
    output: Sequence[Block | TextBlock]
    artifacts: NotRequired[Sequence[dict[str, Any]]]


def text(value: str) -> TextBlock:
    """A text content block."""
    return {"type": "text", "text": value}


def input_blocks(value: str | Sequence[InputBlock]) -> list[InputBlock]:
    """A turn's ``input``: a string becomes one text block; a list is sent as given."""
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    return list(value)
