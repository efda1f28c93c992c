"""Helpers shared by the provider encodings (pure, no I/O)."""

from __future__ import annotations

from typing import Any

from app.core.content import DataBlock
from app.core.jsontext import loads_arguments

__all__ = [
    "IMAGE_MEDIA_TYPES",
    "PDF_MEDIA_TYPE",
    "attachment_note",
    "is_image",
    "parse_tool_input",
]

# The image types both providers document for inline images (OpenAI vision guide, Anthropic
# "Vision" page). A URL without a media type is assumed to be an image: both providers fetch the
# URL themselves and reject it if it is not one, which is a clearer failure than a silent drop.
IMAGE_MEDIA_TYPES: frozenset[str] = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp"}
)
# Both providers take PDF documents inline (OpenAI "file" content part, Anthropic "document"
# block); every other media type becomes a text note (``attachment_note``).
PDF_MEDIA_TYPE = "application/pdf"


def is_image(block: DataBlock) -> bool:
    source = block["source"]
    media_type = source.get("media_type")
    if source["source_type"] == "url" and media_type is None:
        return True
    return media_type in IMAGE_MEDIA_TYPES


def attachment_note(block: DataBlock) -> str:
    """The text that stands in for an attachment the protocol cannot carry.

    It names the attachment so the model knows something was there; it is derived from the
    block alone, so the same block always encodes to the same bytes.
    """
    source = block["source"]
    name = block.get("name") or "unnamed"
    if source["source_type"] == "file_id":
        what = f"file id {source.get('id', '')}"
    else:
        what = source.get("media_type") or "unknown media type"
    return f"[attachment {name} ({what}) not included: this model API cannot take it inline]"


def parse_tool_input(raw: str) -> dict[str, Any]:
    """A tool call's raw JSON text as an object; anything else becomes ``{}``.

    The model may have produced arguments that are not usable JSON — broken, ``NaN``, nested
    past ``MAX_ARGUMENT_DEPTH`` (``app.core.jsontext``: the turn answered such a call with an
    ``invalid_arguments`` result by the same rule); Anthropic requires ``tool_use.input`` to be
    an object, so the deterministic fallback is the empty object.
    """
    try:
        value = loads_arguments(raw)
    except (ValueError, TypeError):
        return {}
    return value if isinstance(value, dict) else {}
