"""OpenAI Responses input items as ``POST /v1/sessions/{session_id}/items`` takes them.

The schema states exactly what ``app.providers.encoding.openai_responses_items`` can hold, so a
request the schema allows is stored and one it refuses is a 422 naming the item: user and
assistant messages, reasoning, ``function_call`` and ``function_call_output``. Items keep every
other field they carry (the SDK's ``id``, ``status``, ``encrypted_content`` …): reasoning items
are echoed back verbatim.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

__all__ = ["ResponsesItem"]

NonEmpty = Annotated[str, Field(min_length=1)]
# A user message needs text that is not blank (spec §5: an empty user message is refused).
NotBlank = Annotated[str, Field(pattern=r"\S")]


class _Open(BaseModel):
    """Other fields are kept as they are (the SDK's item ids and statuses)."""

    model_config = ConfigDict(extra="allow")


class TextPart(_Open):
    type: Literal["input_text", "output_text"]
    text: str


class ImageUrlPart(_Open):
    type: Literal["input_image"]
    image_url: NonEmpty = Field(description="A URL, or a `data:` URL with base64 content.")


class ImageFilePart(_Open):
    type: Literal["input_image"]
    file_id: str


class FileDataPart(_Open):
    type: Literal["input_file"]
    file_data: str = Field(description="A `data:` URL with base64 content.")
    filename: str | None = None


class FileIdPart(_Open):
    type: Literal["input_file"]
    file_id: str
    filename: str | None = None


class FileUrlPart(_Open):
    type: Literal["input_file"]
    file_url: str
    filename: str | None = None


InputPart = TextPart | ImageUrlPart | ImageFilePart | FileDataPart | FileIdPart | FileUrlPart


class UserTextPart(_Open):
    type: Literal["input_text", "output_text"]
    text: NotBlank


UserPart = UserTextPart | ImageUrlPart | ImageFilePart | FileDataPart | FileIdPart | FileUrlPart


class RefusalPart(_Open):
    type: Literal["refusal"]
    refusal: str


class UserMessage(_Open):
    type: Literal["message"] = "message"
    role: Literal["user"]
    content: NotBlank | Annotated[list[UserPart], Field(min_length=1)]


class AssistantMessage(_Open):
    type: Literal["message"] = "message"
    role: Literal["assistant"]
    content: str | list[TextPart | RefusalPart]


class Reasoning(_Open):
    type: Literal["reasoning"]


class FunctionCall(_Open):
    type: Literal["function_call"]
    call_id: NonEmpty
    name: NonEmpty
    arguments: str = Field("", description="The JSON text of the call's arguments.")


class FunctionCallOutput(_Open):
    type: Literal["function_call_output"]
    call_id: NonEmpty
    output: str | list[InputPart]


def _kind(item: Any) -> str | None:
    if isinstance(item, BaseModel):
        item = item.model_dump()
    if not isinstance(item, dict):
        return None
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role")
        return f"{role}_message" if role in ("user", "assistant") else None
    return kind if kind in _TAGS else None


_TAGS = ("reasoning", "function_call", "function_call_output")

ResponsesItem = Annotated[
    Annotated[UserMessage, Tag("user_message")]
    | Annotated[AssistantMessage, Tag("assistant_message")]
    | Annotated[Reasoning, Tag("reasoning")]
    | Annotated[FunctionCall, Tag("function_call")]
    | Annotated[FunctionCallOutput, Tag("function_call_output")],
    Discriminator(
        _kind,
        custom_error_type="unsupported_item",
        custom_error_message="not an item the session can hold: user and assistant messages, "
        "reasoning, function_call and function_call_output (instructions belong to the "
        "session's system prompt, agent.system_prompt)",
    ),
]
